/* Bilinear resizing against PyTorch: pelab_image_resize must equal
 * torch.nn.functional.interpolate(x, size, mode='bilinear', align_corners=False) (torch 1.13, in
 * float64) on random images: 28x28 to the resolution sweep's 36, 44, 56, 84 and to 13 and 20
 * (downscales), and a 5x7 image to 9x16. Skipped (exit 77, one line) without python3-torch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/check.h"
#include "lib/tmpdir.h"
#include "pelab/image.h"
#include "pelab/rng.h"

#define PY "/usr/bin/python3"

_Static_assert(sizeof(pelab_real) == sizeof(double), "the test programs are built in double precision");

/* Reads rows·cols doubles per case from in.f64 (cases listed in cases.txt as "rows cols out_rows
 * out_cols"), writes each case's F.interpolate output to out.f64. */
static const char script[] =
    "import sys, struct, torch\n"
    "import torch.nn.functional as F\n"
    "d = sys.argv[1]\n"
    "raw = open(d + '/in.f64', 'rb').read()\n"
    "out = open(d + '/out.f64', 'wb')\n"
    "off = 0\n"
    "for line in open(d + '/cases.txt'):\n"
    "    h, w, oh, ow = map(int, line.split())\n"
    "    x = torch.tensor(struct.unpack('<%dd' % (h * w), raw[off:off + 8 * h * w]), dtype=torch.float64)\n"
    "    off += 8 * h * w\n"
    "    y = F.interpolate(x.reshape(1, 1, h, w), size=(oh, ow), mode='bilinear', align_corners=False)\n"
    "    out.write(struct.pack('<%dd' % (oh * ow), *y.flatten().tolist()))\n";

int main(void) {
    if (system(PY " -c 'import torch' >/dev/null 2>&1") != 0) {
        printf("skipped: python3-torch is not installed (run 'make deps')\n");
        return 77;
    }
    const char *dir = tmpdir_create("pelab-image-torch");
    if (!dir) return 1;
    const int cases[][4] = {{28, 28, 36, 36}, {28, 28, 44, 44}, {28, 28, 56, 56}, {28, 28, 84, 84},
                            {28, 28, 13, 13}, {28, 28, 20, 20}, {5, 7, 9, 16}};
    const int n_cases = (int)(sizeof cases / sizeof cases[0]);
    FILE *in = fopen(tmpdir_path("in.f64"), "wb"), *list = fopen(tmpdir_path("cases.txt"), "w");
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 16);
    double *images[16];
    for (int k = 0; k < n_cases; k++) {
        int n = cases[k][0] * cases[k][1];
        images[k] = malloc(sizeof(double) * n);
        /* pixels as the task gives them: bytes, normalised */
        for (int i = 0; i < n; i++) images[k][i] = ((double)pelab_rng_below(&rng, 256) / 255 - 0.2858) / 0.3529;
        fwrite(images[k], sizeof(double), (size_t)n, in);
        fprintf(list, "%d %d %d %d\n", cases[k][0], cases[k][1], cases[k][2], cases[k][3]);
    }
    fclose(in);
    fclose(list);
    FILE *py = fopen(tmpdir_path("resize.py"), "w");
    fputs(script, py);
    fclose(py);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, PY " %s %s", tmpdir_path("resize.py"), dir);
    CHECK(system(cmd) == 0, "%s failed", cmd);
    FILE *out = fopen(tmpdir_path("out.f64"), "rb");
    CHECK(out != NULL, "no output from torch");
    for (int k = 0; k < n_cases && out; k++) {
        int oh = cases[k][2], ow = cases[k][3];
        double *want = malloc(sizeof(double) * oh * ow), *got = malloc(sizeof(double) * oh * ow);
        CHECK(fread(want, sizeof(double), (size_t)oh * ow, out) == (size_t)oh * ow, "case %d: short output", k);
        pelab_image_resize(got, oh, ow, images[k], cases[k][0], cases[k][1]);
        double worst = 0;
        for (int i = 0; i < oh * ow; i++) worst = fmax(worst, fabs(got[i] - want[i]));
        CHECK(worst <= 1e-12, "%dx%d -> %dx%d: off from torch by %g", cases[k][0], cases[k][1], oh, ow, worst);
        printf("  %2dx%-2d -> %2dx%-2d: max |pelab - torch| %.2g\n", cases[k][0], cases[k][1], oh, ow, worst);
        free(want);
        free(got);
    }
    if (out) fclose(out);
    for (int k = 0; k < n_cases; k++) free(images[k]);
    tmpdir_remove();
    return check_report("test_image_torch");
}
