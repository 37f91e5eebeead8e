/* pelab analyze seqpe: the similarity of a SeqPE run's position embeddings, e_p · e_q for p, q in
 * a range, as a CSV matrix: the data of the SeqPE paper's Figure 2 (Li et al. 2025), which shows
 * how the regulariser L_δ turns lexical similarity of digit strings ("100" near "1000") into
 * closeness of positions.
 *
 *   p,<q_0>,<q_1>,...        header: the column positions
 *   <p_i>,<e_{p_i}·e_{q_0}>,...   one row per position
 *
 * With --nearest T it writes instead, for each position p of the range, the nearest of the
 * embeddings of the training window, e_0 .. e_{T-1} (p itself left out), and the Euclidean
 * distance to it: whether the positions beyond the training length stay among the ones the model
 * was trained on, or leave them (a probe of extrapolation):
 *
 *   p,nearest,distance,norm      one row per position: argmin_q |e_p - e_q|, that minimum, |e_p|
 *
 * With --checkpoints as well, the same at every checkpoint the run kept and at its final model,
 * summarised per band of T positions: how the embeddings beyond the training length move away
 * from (or towards) the trained ones as training goes on:
 *
 *   step,from,to,distance,norm,relative    one row per step and band [from, to) of the positions
 *                                          asked: the means of the distance, of |e_p| and of
 *                                          distance / |e_p|
 *
 * A run on images (2-D positions, the class token at (0, 0) and patches from 1) gives instead the
 * data of the paper's Figure 3: for five positions of a G × G grid (its corners and centre), the
 * dot product with every grid position; the figure's other panel, APE-Learn, is a learned2d run
 * (its table rows, interpolated for a G larger than its training grid),
 *
 *   p_row,p_col,row,col,dot      one row per selected position p and grid cell (row, col)
 *
 * With --variance, instead, how the grid's embeddings e_rc (r, c = 1..G) divide their energy
 * Σ|e_rc|² between the part all cells share, the rows, the columns and the rest (the two-way
 * analysis of variance of the vectors): with ē the mean over the grid, R_r = mean_c e_rc − ē and
 * C_c = mean_r e_rc − ē,
 *   mean G²|ē|²,  rows G·Σ_r |R_r|²,  columns G·Σ_c |C_c|²,  interaction Σ|e_rc − ē − R_r − C_c|²
 * which add up to Σ|e_rc|². The dot products of the figure are dominated by the shared part
 * (e_p·e_q = |ē|² + …); this says how much of what varies varies with each coordinate:
 *
 *   model,grid,part,sum_of_squares,of_total,of_variation
 *                     for each run and side G asked (--model A,B,... --grid G,G,...), rows mean,
 *                     rows, columns, interaction (of_variation: of Σ|e_rc − ē|², empty for mean)
 *
 * With --png, the figure: the matrix as one heatmap (Figure 2), or the five grids side by side on
 * one colour scale (row 1 at the bottom, as a heatmap's axes run).
 *
 * It reads the weights alone: the run opens without its task (no dataset needed).
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "args.h"
#include "checkpoints.h"
#include "plot.h"
#include "pelab/io.h"
#include "pelab/json.h"
#include "pelab/safetensors.h"
#include "pelab/status.h"
#include "pelab/train.h"

static const struct pelab_optdef seqpe_options[] = {
    {"model", PELAB_OPT_STR, "", 0, 0, NULL,
     "run directory of a --pe seqpe run, or of a --pe learned2d run on images (required); with "
     "--variance, one or more, comma-separated"},
    {"out", PELAB_OPT_STR, "-", 0, 0, NULL, "CSV file to write (replaced atomically), or - for standard output"},
    PELAB_OPT_ROW_EDITED,
    {"from", PELAB_OPT_INT, "0", 0, 2147483647.0, NULL, "first position"},
    {"to", PELAB_OPT_INT, "2048", 1, 2147483647.0, NULL, "positions below it (the paper's figure: 2048)"},
    {"step", PELAB_OPT_INT, "8", 1, 2147483647.0, NULL, "every step-th position (1: all of them)"},
    {"nearest", PELAB_OPT_INT, "0", 0, 1048576, NULL,
     "T > 0: instead of the matrix, each position's nearest embedding among e_0..e_{T-1} (itself "
     "left out) and the distance to it; 0: the matrix"},
    {"grid", PELAB_OPT_STR, "0", 0, 0, NULL,
     "image runs: the side G of the grid drawn, 0..256 (0: the training grid; larger: a higher "
     "resolution); with --variance, one or more sides, comma-separated"},
    {"png", PELAB_OPT_STR, "", 0, 0, NULL,
     "also draw the figure into this PNG file (replaced atomically; needs a build with cairo): the "
     "matrix as a heatmap, or an image run's five grids"},
    {"width", PELAB_OPT_INT, "1000", PELAB_PLOT_MIN_SIDE, PELAB_PLOT_MAX_SIDE, NULL, "PNG width in pixels"},
    {"height", PELAB_OPT_INT, "700", PELAB_PLOT_MIN_SIDE, PELAB_PLOT_MAX_SIDE, NULL, "PNG height in pixels"},
    {"variance", PELAB_OPT_SWITCH, "off", 0, 0, NULL,
     "image runs: instead of the five grids, how the grid's embeddings divide their energy between "
     "the mean, the rows, the columns and the rest, for each run of --model and side of --grid "
     "(columns model,grid,part,sum_of_squares,of_total,of_variation)"},
    {"checkpoints", PELAB_OPT_SWITCH, "off", 0, 0, NULL,
     "with --nearest T: at every kept checkpoint and the final model, the means per band of T "
     "positions (columns step,from,to,distance,norm,relative)"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

#define MAX_POINTS 8192 /* positions in one matrix: 8192² dot products, ~0.7 GB of text */

static void analyze_seqpe_help(FILE *f) {
    struct pelab_group g = {"options", seqpe_options};
    fprintf(f, "usage: pelab analyze seqpe --model DIR [--out FILE|-] [--from P] [--to P] [--step N]\n"
               "                           [--nearest T [--checkpoints]] [--png FILE]\n"
               "       pelab analyze seqpe --model DIR [--out FILE|-] [--grid G] [--png FILE]   (images)\n"
               "       pelab analyze seqpe --variance --model DIR[,DIR...] [--grid G[,G...]] [--out FILE|-]\n\n"
               "Writes the dot products e_p . e_q of a SeqPE run's position embeddings (the\n"
               "encoder's output) for p, q = from, from+step, ... below to, as a CSV matrix: a\n"
               "header p,<q...>, then one row per p. The SeqPE paper's Figure 2 shows 0..2048.\n"
               "With --nearest T, rows p,nearest,distance,norm instead: the nearest of the\n"
               "training window's embeddings e_0..e_{T-1} to each e_p (p itself left out).\n"
               "With --checkpoints too, at every checkpoint the run kept and its final model, the\n"
               "means per band of T positions: rows step,from,to,distance,norm,relative.\n"
               "For a run on images, the SeqPE paper's Figure 3: the dot products of five positions\n"
               "of the G x G grid (its corners and centre) with every grid position, rows\n"
               "p_row,p_col,row,col,dot; a --pe learned2d run (the paper's APE-Learn) gives the\n"
               "same of its table, interpolated for a larger --grid as its evaluation does.\n"
               "With --variance (images), the grid's embeddings' energy split between their mean,\n"
               "the rows, the columns and the rest, for each run and grid side asked: rows\n"
               "model,grid,part,sum_of_squares,of_total,of_variation.\n"
               "--png draws the matrix, or the five grids, as heatmaps.\n");
    pelab_args_help(f, &g, 1, NULL);
}

/* The matrix, one row at a time; dots (n, n), when not NULL, receives it for the figure. */
static int write_matrix(FILE *f, struct pelab_model *m, long from, long step, int n, double *dots) {
    const int D = m->cfg.d_model;
    int32_t *pos = malloc((size_t)n * sizeof *pos);
    pelab_real *e = malloc((size_t)n * D * sizeof *e);
    int rc = PELAB_OK;
    if (!pos || !e) {
        rc = pelab_fail(PELAB_ERR_RUNTIME, "out of memory for %d position embeddings", n);
        goto done;
    }
    for (int i = 0; i < n; i++) pos[i] = (int32_t)(from + step * i);
    if ((rc = m->pe.ops->position_vectors(&m->pe, pos, n, e))) goto done;
    fprintf(f, "p");
    for (int j = 0; j < n; j++) fprintf(f, ",%d", pos[j]);
    fprintf(f, "\n");
    for (int i = 0; i < n; i++) {
        fprintf(f, "%d", pos[i]);
        for (int j = 0; j < n; j++) {
            double dot = 0;
            for (int c = 0; c < D; c++) dot += (double)e[(long)i * D + c] * e[(long)j * D + c];
            fprintf(f, ",%.7g", dot);
            if (dots) dots[(long)i * n + j] = dot;
        }
        fprintf(f, "\n");
    }
done:
    free(pos);
    free(e);
    return rc;
}

/* For each of the n positions p = from, from+step, ...: the q < T (q != p) with the smallest
 * |e_p - e_q| into arg[i], that distance into dist[i] and |e_p| into norm[i]. */
static int nearest_of(struct pelab_model *m, long from, long step, int n, int T, int *arg, double *dist,
                      double *norm) {
    const int D = m->cfg.d_model;
    int32_t *pos = malloc((size_t)(n + T) * sizeof *pos);
    pelab_real *e = malloc((size_t)(n + T) * D * sizeof *e);
    int rc = PELAB_OK;
    if (!pos || !e) {
        rc = pelab_fail(PELAB_ERR_RUNTIME, "out of memory for %d position embeddings", n + T);
        goto done;
    }
    for (int q = 0; q < T; q++) pos[q] = q; /* the window first, then the positions asked */
    for (int i = 0; i < n; i++) pos[T + i] = (int32_t)(from + step * i);
    if ((rc = m->pe.ops->position_vectors(&m->pe, pos, n + T, e))) goto done;
    for (int i = 0; i < n; i++) {
        const pelab_real *ep = e + (long)(T + i) * D;
        double best = -1, sq = 0;
        arg[i] = -1;
        for (int c = 0; c < D; c++) sq += (double)ep[c] * ep[c];
        for (int q = 0; q < T; q++) {
            if (q == pos[T + i]) continue;
            double d2 = 0;
            for (int c = 0; c < D; c++) {
                double d = (double)ep[c] - e[(long)q * D + c];
                d2 += d * d;
            }
            if (best < 0 || d2 < best) best = d2, arg[i] = q;
        }
        dist[i] = sqrt(best);
        norm[i] = sqrt(sq);
    }
done:
    free(pos);
    free(e);
    return rc;
}

/* Rows p,nearest,distance,norm for the model's weights now (checkpoints: 0), or rows
 * step,from,to,distance,norm,relative per band of T positions (checkpoints: 1). */
static int write_nearest(FILE *f, struct pelab_model *m, long from, long step, int n, int T, int checkpoints,
                         long at_step) {
    int *arg = malloc((size_t)n * sizeof *arg);
    double *dist = malloc((size_t)n * sizeof *dist), *norm = malloc((size_t)n * sizeof *norm);
    int rc = arg && dist && norm ? nearest_of(m, from, step, n, T, arg, dist, norm)
                                 : pelab_fail(PELAB_ERR_RUNTIME, "out of memory for %d positions", n);
    for (int i = 0; !rc && !checkpoints && i < n; i++)
        fprintf(f, "%ld,%d,%.7g,%.7g\n", from + step * i, arg[i], dist[i], norm[i]);
    for (long b0 = from - from % T; !rc && checkpoints && b0 < from + step * n; b0 += T) {
        double sd = 0, sn = 0, sr = 0;
        int count = 0;
        for (int i = 0; i < n; i++) {
            const long p = from + step * i;
            if (p < b0 || p >= b0 + T) continue;
            sd += dist[i], sn += norm[i], sr += norm[i] > 0 ? dist[i] / norm[i] : 0, count++;
        }
        if (count) fprintf(f, "%ld,%ld,%ld,%.7g,%.7g,%.7g\n", at_step, b0, b0 + T, sd / count, sn / count, sr / count);
    }
    free(arg);
    free(dist);
    free(norm);
    return rc;
}

/* --checkpoints: the band summary at every weight file the run kept, in step order. */
static int write_checkpoints(FILE *f, struct pelab_model *m, const char *dir, long from, long step, int n, int T) {
    char **files;
    int nf;
    int rc = pelab_weight_files(dir, &files, &nf);
    if (rc) return rc;
    fprintf(f, "step,from,to,distance,norm,relative\n");
    long last = -1; /* model.safetensors is also saved with the last checkpoint: once */
    for (int i = 0; !rc && i < nf; i++) {
        long at;
        if (!(rc = pelab_load_weights(m, files[i], &at)) && at != last)
            rc = write_nearest(f, m, from, step, n, T, 1, at);
        last = at;
    }
    pelab_weight_files_free(files, nf);
    return rc;
}

enum { GRID_PICKS = 5, MAX_SIDES = 16 /* --variance --grid G,G,... */ };

/* The options of runs on sequences, refused for a run on images and with --variance. */
static const char *const sequence_only[] = {"from", "to", "step", "nearest", "checkpoints"};
enum { N_SEQUENCE_ONLY = sizeof sequence_only / sizeof *sequence_only };

/* The five positions of a G × G grid (coordinates 1..G): the corners and the centre. */
static void grid_picks(int G, int32_t pick[GRID_PICKS][2]) {
    const int c = (G + 1) / 2;
    const int32_t p[GRID_PICKS][2] = {{1, 1}, {1, G}, {c, c}, {G, 1}, {G, G}};
    memcpy(pick, p, sizeof p);
}

/* The cells of a G × G grid, row-major: (row, col) pairs, coordinates 1..G. */
static void grid_positions(int32_t *pos, int G) {
    for (int r = 0; r < G; r++)
        for (int c = 0; c < G; c++) pos[2 * (r * G + c)] = r + 1, pos[2 * (r * G + c) + 1] = c + 1;
}

/* Rows p_row,p_col,row,col,dot for the picks against every cell of the G × G grid; maps
 * (GRID_PICKS, G, G), when not NULL, receives the dot products, cell (row, col) at
 * [row − 1][col − 1]. */
static int write_grid(FILE *f, struct pelab_model *m, int G, double *maps) {
    const int D = m->cfg.d_model, n = G * G + GRID_PICKS;
    int32_t *pos = malloc((size_t)n * 2 * sizeof *pos), pick[GRID_PICKS][2];
    pelab_real *e = malloc((size_t)n * D * sizeof *e);
    int rc = PELAB_OK;
    if (!pos || !e) {
        rc = pelab_fail(PELAB_ERR_RUNTIME, "out of memory for %d position embeddings", n);
        goto done;
    }
    grid_picks(G, pick);
    grid_positions(pos, G);
    memcpy(pos + 2 * G * G, pick, sizeof pick);
    if ((rc = m->pe.ops->position_vectors(&m->pe, pos, n, e))) goto done;
    fprintf(f, "p_row,p_col,row,col,dot\n");
    for (int k = 0; k < GRID_PICKS; k++) {
        const pelab_real *ep = e + (long)(G * G + k) * D;
        for (int i = 0; i < G * G; i++) {
            double dot = 0;
            for (int c = 0; c < D; c++) dot += (double)ep[c] * e[(long)i * D + c];
            fprintf(f, "%d,%d,%d,%d,%.7g\n", pick[k][0], pick[k][1], pos[2 * i], pos[2 * i + 1], dot);
            if (maps) maps[(long)k * G * G + i] = dot;
        }
    }
done:
    free(pos);
    free(e);
    return rc;
}

/* --variance: rows model,grid,part,sum_of_squares,of_total,of_variation for the G × G grid's
 * embeddings of one run (the two-way decomposition at the top of this file), sums in double. */
static int write_variance(FILE *f, struct pelab_model *m, const char *dir, int G) {
    const int D = m->cfg.d_model, n = G * G;
    int32_t *pos = malloc((size_t)n * 2 * sizeof *pos);
    pelab_real *e = malloc((size_t)n * D * sizeof *e);
    double *mean = calloc((size_t)D * (1 + 2 * G), sizeof *mean), *row = mean + D, *col = row + (long)G * D;
    int rc = PELAB_OK;
    if (!pos || !e || !mean) {
        rc = pelab_fail(PELAB_ERR_RUNTIME, "out of memory for %d position embeddings", n);
        goto done;
    }
    grid_positions(pos, G);
    if ((rc = m->pe.ops->position_vectors(&m->pe, pos, n, e))) goto done;
    for (int r = 0; r < G; r++) /* the sums of each row and column, then the means */
        for (int c = 0; c < G; c++)
            for (int k = 0; k < D; k++) {
                const double v = e[(long)(r * G + c) * D + k];
                mean[k] += v, row[(long)r * D + k] += v, col[(long)c * D + k] += v;
            }
    for (int k = 0; k < D; k++) mean[k] /= n;
    for (long i = 0; i < (long)G * D; i++) row[i] = row[i] / G - mean[i % D], col[i] = col[i] / G - mean[i % D];
    double ss_mean = 0, ss_row = 0, ss_col = 0, ss_int = 0, ss_all = 0;
    for (int k = 0; k < D; k++) ss_mean += (double)n * mean[k] * mean[k];
    for (long i = 0; i < (long)G * D; i++) ss_row += (double)G * row[i] * row[i], ss_col += (double)G * col[i] * col[i];
    for (int r = 0; r < G; r++)
        for (int c = 0; c < G; c++)
            for (int k = 0; k < D; k++) {
                const double v = e[(long)(r * G + c) * D + k];
                const double rest = v - mean[k] - row[(long)r * D + k] - col[(long)c * D + k];
                ss_int += rest * rest, ss_all += v * v;
            }
    const double varied = ss_row + ss_col + ss_int;
    const char *parts[4] = {"mean", "rows", "columns", "interaction"};
    const double ss[4] = {ss_mean, ss_row, ss_col, ss_int};
    struct pelab_sb name = {0};
    pelab_sb_csv_cell(&name, dir);
    for (int i = 0; i < 4; i++) {
        fprintf(f, "%s,%d,%s,%.9g,%.6f,", name.data, G, parts[i], ss[i], ss_all > 0 ? ss[i] / ss_all : 0);
        if (i) fprintf(f, "%.6f", varied > 0 ? ss[i] / varied : 0);
        fprintf(f, "\n");
    }
    pelab_sb_free(&name);
done:
    free(pos);
    free(e);
    free(mean);
    return rc;
}

/* --png: the matrix as one heatmap (n_maps 1, side n) or the five grids (side G). */
static int draw(const char *png, const struct pelab_opts *opts, const char *dir, const char *pe_name,
                const double *z, int n_maps, int side, long from, long step) {
    static char titles[GRID_PICKS][48], title[PELAB_OPT_VAL_MAX + 64];
    struct pelab_plot_matrix maps[GRID_PICKS];
    int32_t pick[GRID_PICKS][2];
    if (n_maps > 1) grid_picks(side, pick);
    for (int k = 0; k < n_maps; k++) {
        if (n_maps > 1) snprintf(titles[k], sizeof titles[k], "position (%d, %d)", pick[k][0], pick[k][1]);
        else snprintf(titles[k], sizeof titles[k], "positions %ld + %ld·i", from, step);
        maps[k] = (struct pelab_plot_matrix){titles[k], n_maps > 1 ? "column − 1" : "i", n_maps > 1 ? "row − 1" : "j",
                                             z + (long)k * side * side, side, side};
    }
    snprintf(title, sizeof title, "%s: %s position embeddings, dot products", dir, pe_name);
    return pelab_plot_heatmaps(png, (int)pelab_opt_int(opts, seqpe_options, "width"),
                               (int)pelab_opt_int(opts, seqpe_options, "height"), title, "e_p · e_q", maps, n_maps);
}

/* --grid: the sides asked, comma-separated, each 0..256 (0: the run's training grid); at most
 * max of them (1: the figure's one side). */
static int parse_sides(const char *text, int *sides, int max, int *n) {
    *n = 0;
    for (const char *p = text;; p++) {
        char *end;
        const long v = isdigit((unsigned char)*p) ? strtol(p, &end, 10) : -1;
        if (v < 0 || v > 256 || (*end && *end != ','))
            return pelab_fail(PELAB_ERR_USAGE, "--grid %s: give %s, each a whole number 0..256 (0: the "
                              "training grid)", text, max > 1 ? "one or more sides, comma-separated" : "one side");
        if (*n == max)
            return max > 1 ? pelab_fail(PELAB_ERR_USAGE, "--grid %s: at most %d sides", text, max)
                           : pelab_fail(PELAB_ERR_USAGE, "--grid %s: one side here (several are for --variance)", text);
        sides[(*n)++] = (int)v;
        if (!*end) return PELAB_OK;
        p = end;
    }
}

/* Opens the weights of a run whose encoding has position vectors (SeqPE, or learned2d). */
static int open_embeddings(struct pelab_run *run, const char *dir) {
    int rc = pelab_run_open_model(run, dir);
    if (rc) return rc;
    if (!run->model.pe.ops->position_vectors) {
        rc = pelab_fail(PELAB_ERR_USAGE, "%s: a run of --pe %s, which has no position vectors; analyze "
                        "seqpe needs a --pe seqpe run, or a --pe learned2d run on images", dir,
                        run->model.pe.ops->name);
        pelab_run_close(run);
    }
    return rc;
}

/* --model A,B,...: the run directories, split in place in list (each once, none empty). */
static int split_runs(char *list, const char *text, char **dirs, int max, int *n) {
    *n = 0;
    for (char *dir = list, *next; dir; dir = next) {
        if ((next = strchr(dir, ','))) *next++ = '\0';
        if (!dir[0]) return pelab_fail(PELAB_ERR_USAGE, "--model %s: an empty run directory in the list", text);
        for (int k = 0; k < *n; k++)
            if (strcmp(dirs[k], dir) == 0) return pelab_fail(PELAB_ERR_USAGE, "--model %s: %s twice", text, dir);
        if (*n == max) return pelab_fail(PELAB_ERR_USAGE, "--model %s: more than %d runs", text, max);
        dirs[(*n)++] = dir;
    }
    return PELAB_OK;
}

/* --variance: the split of each run's grid embeddings (--model A,B,...) at each side asked
 * (--grid G,G,...), one CSV, runs in the order given, then sides. */
static int analyze_variance(const struct pelab_opts *opts, const char *models) {
    for (int i = 0; i < N_SEQUENCE_ONLY; i++)
        if (pelab_opts_get(opts, sequence_only[i]))
            return pelab_fail(PELAB_ERR_USAGE, "--%s is for runs on sequences; --variance is for runs on images",
                              sequence_only[i]);
    if (pelab_opt_str(opts, seqpe_options, "png")[0])
        return pelab_fail(PELAB_ERR_USAGE, "--png draws the five grids; --variance is CSV only");
    static char list[PELAB_OPT_VAL_MAX];
    static char *dirs[PELAB_OPT_VAL_MAX / 2];
    static struct pelab_run run;
    int sides[MAX_SIDES], n_sides, n_runs, rc;
    snprintf(list, sizeof list, "%s", models);
    if ((rc = parse_sides(pelab_opt_str(opts, seqpe_options, "grid"), sides, MAX_SIDES, &n_sides)) ||
        (rc = split_runs(list, models, dirs, PELAB_OPT_VAL_MAX / 2, &n_runs)))
        return rc;
    pelab_safetensors_accept_edited(pelab_opt_switch(opts, seqpe_options, "edited"));
    const char *path = pelab_opt_str(opts, seqpe_options, "out");
    struct pelab_atomic_file af = {0};
    FILE *f = stdout;
    if (strcmp(path, "-") != 0) {
        if ((rc = pelab_check_output("--out", path)) || (rc = pelab_atomic_open(&af, path))) return rc;
        f = af.f;
    }
    fprintf(f, "model,grid,part,sum_of_squares,of_total,of_variation\n");
    for (int r = 0; !rc && r < n_runs; r++) {
        if ((rc = open_embeddings(&run, dirs[r]))) break;
        const int G0 = run.model.pe.grid; /* --grid 0 */
        int G[MAX_SIDES];
        if (run.model.pe.pos_dims != 2)
            rc = pelab_fail(PELAB_ERR_USAGE, "--variance: %s is a run on sequences; --variance is for runs "
                            "on images", dirs[r]);
        for (int i = 0; !rc && i < n_sides; i++) {
            G[i] = sides[i] ? sides[i] : G0;
            for (int k = 0; !rc && k < i; k++)
                if (G[k] == G[i])
                    rc = pelab_fail(PELAB_ERR_USAGE, "--grid %s: side %d twice for %s (0 is its training grid, "
                                    "%d)", pelab_opt_str(opts, seqpe_options, "grid"), G[i], dirs[r], G0);
        }
        for (int i = 0; !rc && i < n_sides; i++) rc = write_variance(f, &run.model, dirs[r], G[i]);
        pelab_run_close(&run);
    }
    if (f != stdout) {
        if (rc) pelab_atomic_abort(&af);
        else rc = pelab_atomic_commit(&af);
    } else if (fflush(stdout) != 0 && !rc) rc = pelab_fail(PELAB_ERR_RUNTIME, "writing standard output failed");
    return rc;
}

int pelab_analyze_seqpe(int argc, char **argv) {
    struct pelab_group g = {"options", seqpe_options};
    static struct pelab_opts opts;
    int help;
    int rc = pelab_args_parse(argc, argv, &g, 1, &opts, &help);
    if (!rc) rc = pelab_args_check_only(&opts, seqpe_options, "analyze seqpe");
    if (rc) return rc;
    if (help) {
        analyze_seqpe_help(stdout);
        return PELAB_OK;
    }
    const char *dir = pelab_opt_str(&opts, seqpe_options, "model");
    if (!dir[0]) return pelab_fail(PELAB_ERR_USAGE, "--model DIR is required (a run directory)");
    if (pelab_opt_switch(&opts, seqpe_options, "variance")) return analyze_variance(&opts, dir);
    struct stat st;
    if (strchr(dir, ',') && stat(dir, &st) != 0) /* a list, not a directory with a comma in its name */
        return pelab_fail(PELAB_ERR_USAGE, "--model %s: several runs are for --variance; this analysis "
                          "takes one", dir);
    int grid, n_sides;
    if ((rc = parse_sides(pelab_opt_str(&opts, seqpe_options, "grid"), &grid, 1, &n_sides))) return rc;
    const long from = pelab_opt_int(&opts, seqpe_options, "from");
    const long to = pelab_opt_int(&opts, seqpe_options, "to");
    const long step = pelab_opt_int(&opts, seqpe_options, "step");
    if (to <= from)
        return pelab_fail(PELAB_ERR_USAGE, "--to %ld must be above --from %ld", to, from);
    const long n = (to - from + step - 1) / step;
    if (n > MAX_POINTS)
        return pelab_fail(PELAB_ERR_USAGE, "--from %ld --to %ld --step %ld gives %ld positions, "
                          "more than %d: take a larger --step", from, to, step, n, MAX_POINTS);
    const int nearest = (int)pelab_opt_int(&opts, seqpe_options, "nearest");
    if (nearest == 1)
        return pelab_fail(PELAB_ERR_USAGE, "--nearest 1: position 0 would have no other to be "
                          "near; take 2 or more (or 0 for the matrix)");
    const int checkpoints = pelab_opt_switch(&opts, seqpe_options, "checkpoints");
    if (checkpoints && !nearest)
        return pelab_fail(PELAB_ERR_USAGE, "--checkpoints summarises --nearest T: give --nearest too");
    const char *png = pelab_opt_str(&opts, seqpe_options, "png");
    if (png[0] && !pelab_plot_available()) return pelab_plot_unavailable("--png");
    if (png[0] && nearest)
        return pelab_fail(PELAB_ERR_USAGE, "--png draws the matrix (or an image run's grids); --nearest is CSV only");
    if (png[0] && (rc = pelab_check_output("--png", png))) return rc;
    pelab_safetensors_accept_edited(pelab_opt_switch(&opts, seqpe_options, "edited"));
    const char *out = pelab_opt_str(&opts, seqpe_options, "out");
    if (strcmp(out, "-") != 0 && (rc = pelab_check_output("--out", out))) return rc;
    static struct pelab_run run;
    if ((rc = open_embeddings(&run, dir))) return rc;
    struct pelab_model *m = &run.model;
    const int image = m->pe.pos_dims == 2, G = grid ? grid : m->pe.grid;
    for (int i = 0; i < N_SEQUENCE_ONLY && !rc; i++)
        if (image && pelab_opts_get(&opts, sequence_only[i]))
            rc = pelab_fail(PELAB_ERR_USAGE, "--%s: %s is a run on images, whose positions are a grid "
                            "(--grid G); --%s is for runs on sequences", sequence_only[i], dir, sequence_only[i]);
    if (!rc && !image && pelab_opts_get(&opts, "grid"))
        rc = pelab_fail(PELAB_ERR_USAGE, "--grid: %s is a run on sequences; --grid is for runs on images", dir);
    double *z = NULL; /* the figure's values */
    if (!rc && png[0] && !(z = malloc(sizeof *z * (image ? (size_t)GRID_PICKS * G * G : (size_t)n * n))))
        rc = pelab_fail(PELAB_ERR_RUNTIME, "out of memory for the figure");
    if (rc) {
        pelab_run_close(&run);
        return rc;
    }
    const char *path = pelab_opt_str(&opts, seqpe_options, "out");
    struct pelab_atomic_file af = {0};
    FILE *f = stdout;
    if (strcmp(path, "-") != 0) {
        if ((rc = pelab_atomic_open(&af, path))) {
            pelab_run_close(&run);
            return rc;
        }
        f = af.f;
    }
    if (image) {
        rc = write_grid(f, m, G, z);
    } else if (checkpoints) {
        rc = write_checkpoints(f, m, dir, from, step, (int)n, nearest);
    } else if (nearest) {
        fprintf(f, "p,nearest,distance,norm\n");
        rc = write_nearest(f, m, from, step, (int)n, nearest, 0, -1);
    } else {
        rc = write_matrix(f, m, from, step, (int)n, z);
    }
    if (f != stdout) {
        if (rc) pelab_atomic_abort(&af);
        else rc = pelab_atomic_commit(&af);
    } else if (fflush(stdout) != 0) rc = pelab_fail(PELAB_ERR_RUNTIME, "writing standard output failed");
    if (!rc && z) rc = draw(png, &opts, dir, m->pe.ops->name, z, image ? GRID_PICKS : 1, image ? G : (int)n, from, step);
    free(z);
    pelab_run_close(&run);
    return rc;
}
