"""twin_check — compares pelab with its PyTorch twin on the fixtures test_twin wrote.

    /usr/bin/python3 tests/ref/twin_check.py DIR        (DIR/CASE/{model,fixture}.safetensors)

Per case, in float64: logits and loss of one forward, every parameter's gradient (PoPE's delta
included; with SeqPE's regularisers, each of L_delta and L_OOD on pelab's draws, and the gradient
of the whole objective), then 5 training steps (zero grad, forward, backward, clip_grad_norm_(1.0), AdamW with
pelab's lr of that step) compared on each step's loss and gradient norm and on every parameter
after the 5 steps. One line per case and check; exit status 1 on any mismatch.

Tolerances. Both sides compute in float64 (unit roundoff u = 1.1e-16). The model is tiny (2
layers, dot products of length <= 128, softmax over <= 11 keys), so each side's own rounding error
is below ~1e3 u ~ 1e-13 of a tensor's scale; the two sides differ only in summation order and in
libm vs. torch exp/tanh/sin/cos (<= 1 ulp each). A formula difference (an epsilon, a scale, a
position off by one, a softplus threshold, a clamp boundary) shows at 1e-7 or above. Hence, with
scale = max |reference| of the tensor compared:
  - logits, loss:          max |diff| <= 1e-11 * scale
  - gradients, grad norms: max |diff| <= 1e-10 * scale   (backward roughly doubles the op count,
                                                          and sums over B, T, T cancel)
  - parameters after 5 AdamW steps: max |diff| <= 1e-9 * scale. AdamW amplifies a gradient
    difference dg by at most lr / eps = 1e-2 / 1e-8 (near g ~ eps); with dg ~ 1e-18 that is
    ~1e-12 per step, 5e-12 after 5 — still far below 1e-9 of a parameter's scale (>= 1e-2).
  - per-step losses: 1e-10 relative (they follow updated parameters).
These are not to be loosened to make a case pass: a failure means a formula differs.
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pelab_twin  # noqa: E402

TOL_FORWARD = 1e-11
TOL_GRAD = 1e-10
TOL_STEP_LOSS = 1e-10
TOL_AFTER = 1e-9
STEPS = 5

failures = 0


def report(case, check, err, tol, detail=""):
    """err is already relative to the scale; prints one line and counts failures."""
    global failures
    ok = bool(err <= tol)   # NaN fails
    failures += not ok
    print("%-4s %-18s %-30s %.2e (tol %.0e)%s" % ("ok" if ok else "FAIL", case, check, err, tol,
                                                  "  " + detail if detail else ""))
    return ok


def rel_err(a, b, floor=1e-30):
    """max |a - b| / max(max |b|, floor), and the flat index of the worst element."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return float("inf"), -1
    diff = np.abs(a - b)
    if diff.size == 0:
        return 0.0, -1
    scale = max(np.abs(b).max(), floor)
    worst = int(np.nanargmax(diff)) if not np.isnan(diff).all() else 0
    return (diff.max() / scale if not np.isnan(diff).any() else float("nan")), worst


def compare_params(case, check, pelab, twin, tol):
    """pelab: {name: array}; twin: {name: tensor}. One line for the worst parameter, plus one line
    for each parameter out of tolerance."""
    worst_name, worst_err, bad = "", 0.0, []
    # A tensor is measured against its own largest entry, but not below 1e-6 of the largest entry
    # of all: a gradient that is zero but for rounding (the bias of a ReLU unit no input reaches,
    # ~1e-19 where others are ~0.3) has no scale of its own, and its two roundings would otherwise
    # be compared with each other. With the gradients' tolerance (1e-10) the floor still asks
    # agreement to 1e-16 of the largest entry: float64's own rounding of it.
    floor = 1e-6 * max([float(np.abs(t.detach().numpy()).max()) for t in twin.values()
                        if t.numel()] + [1e-21])
    for name, t in twin.items():
        if name not in pelab:
            bad.append((name, float("inf"), "missing in the fixture"))
            continue
        ref = t.detach().numpy()
        err, idx = rel_err(pelab[name], ref, floor)
        if not err <= tol:
            where = np.unravel_index(idx, ref.shape) if idx >= 0 else ()
            bad.append((name, err, "worst at %s: pelab %.17g, twin %.17g" % (
                tuple(int(i) for i in where), np.asarray(pelab[name]).flat[idx] if idx >= 0 else
                float("nan"), ref.flat[idx] if idx >= 0 else float("nan"))))
        if err > worst_err or worst_name == "":
            worst_name, worst_err = name, err
    report(case, check, max([worst_err] + [e for _, e, _ in bad]), tol,
           "(worst: %s)" % worst_name if not bad else "(%d of %d out of tolerance)" % (len(bad), len(twin)))
    for name, err, detail in bad:
        print("       %-40s %.2e  %s" % (name, err, detail))


def batch(fx, prefix=""):
    """tokens, pos, targets and, for a patch model's fixture, its input vectors (else None)."""
    ints = tuple(torch.from_numpy(fx[prefix + k].astype(np.int64)) for k in ("tokens", "pos", "targets"))
    inputs = torch.from_numpy(fx[prefix + "inputs"]) if prefix + "inputs" in fx else None
    return ints + (inputs,)


def aux_terms(case, model, fx, prefix, delta_key, ood_key, i):
    """alpha L_delta + beta L_OOD on the fixture's draw (0 for a fixture without one); each term,
    and the twin's own choice of targets, compared with pelab's."""
    if prefix + "delta_pos" not in fx:
        return 0.0
    draw = [torch.from_numpy(fx[prefix + k].astype(np.int64)) for k in ("delta_pos", "ood_pos")]
    l_delta, l_ood, nearest = pelab_twin.seqpe_regularisers(model, draw[0], None, draw[1])
    wrong = int((nearest != torch.from_numpy(fx[prefix + "target"].astype(np.int64))).sum())
    step = "" if prefix == "reg." else " (step %d)" % i
    if prefix == "reg." or i == STEPS - 1:
        report(case, "L_delta targets" + step, float(wrong), 0.0, "(pelab's nearest candidates)")
        report(case, "L_delta" + step, rel_err(fx[delta_key].flat[i], l_delta.item())[0], TOL_FORWARD,
               "(pelab %.17g, twin %.17g)" % (fx[delta_key].flat[i], l_delta.item()))
        report(case, "L_OOD" + step, rel_err(fx[ood_key].flat[i], l_ood.item())[0], TOL_FORWARD,
               "(pelab %.17g, twin %.17g)" % (fx[ood_key].flat[i], l_ood.item()))
    return model.cfg["seqpe-alpha"] * l_delta + model.cfg["seqpe-beta"] * l_ood


def check_case(case_dir):
    case = os.path.basename(os.path.normpath(case_dir))
    model = pelab_twin.from_safetensors(os.path.join(case_dir, "model.safetensors"), torch.float64)
    fx, _ = pelab_twin.read_safetensors(os.path.join(case_dir, "fixture.safetensors"))

    # one forward and backward (with the encoding's own loss terms where the fixture has them)
    tokens, pos, targets, inputs = batch(fx)
    logits, loss = model(tokens, pos, targets, inputs)
    total = loss + aux_terms(case, model, fx, "reg.", "loss_delta", "loss_ood", 0)
    report(case, "logits", rel_err(fx["logits"], logits.detach().numpy())[0], TOL_FORWARD)
    report(case, "loss", rel_err(fx["loss"], loss.detach().numpy().reshape(1))[0], TOL_FORWARD,
           "(pelab %.17g, twin %.17g)" % (fx["loss"][0], loss.item()))
    model.zero_grad()
    total.backward()
    compare_params(case, "gradients", {k[5:]: v for k, v in fx.items() if k.startswith("grad.")},
                   {n: p.grad if p.grad is not None else torch.zeros_like(p)
                    for n, p in model.named_parameters()}, TOL_GRAD)

    # five training steps with pelab's learning rates
    lrs = fx["lrs"]
    opt = pelab_twin.adamw(model, lr=float(lrs[0]), betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1)
    params = [p for p in model.parameters()]
    step_loss, step_norm = [], []
    for i in range(STEPS):
        for g in opt.param_groups:
            g["lr"] = float(lrs[i])
        opt.zero_grad(set_to_none=False)
        tokens, pos, targets, inputs = batch(fx, "step%d." % i)
        _, loss = model(tokens, pos, targets, inputs)
        (loss + aux_terms(case, model, fx, "step%d.reg." % i, "losses_delta", "losses_ood", i)).backward()
        norm = torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        step_loss.append(loss.item())
        step_norm.append(float(norm))
    e_loss, i_loss = rel_err(fx["losses"], step_loss)
    report(case, "losses of 5 steps", e_loss, TOL_STEP_LOSS,
           "(worst at step %d)" % i_loss if not e_loss <= TOL_STEP_LOSS else "")
    report(case, "grad norms of 5 steps", rel_err(fx["grad_norms"], step_norm)[0], TOL_GRAD)
    compare_params(case, "parameters after 5 steps",
                   {k[7:]: v for k, v in fx.items() if k.startswith("after5.")},
                   dict(model.named_parameters()), TOL_AFTER)
    print("     %-18s lrs %s" % (case, " ".join("%.6g" % x for x in lrs)))


def main():
    if len(sys.argv) != 2:
        print("usage: twin_check.py DIR", file=sys.stderr)
        return 2
    global failures
    torch.set_default_dtype(torch.float64)
    for name, err, tol in pelab_twin.self_test():
        report("twin-self-test", name, err, tol)
    root = sys.argv[1]
    cases = sorted(d for d in os.listdir(root) if os.path.isfile(os.path.join(root, d, "fixture.safetensors")))
    if not cases:
        print("FAIL no fixtures under %s" % root)
        return 1
    for case in cases:
        try:
            check_case(os.path.join(root, case))
        except Exception as e:  # a fixture the twin cannot read is a failure, not a crash
            failures += 1
            print("FAIL %-18s %s: %s" % (case, type(e).__name__, e))
    print("%d cases, %d failed checks" % (len(cases), failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
