/* pelab plot lines: a PNG line plot of two columns of a CSV file, one line per value of a group
 * column. This is how tables from other commands become figures, e.g. an extrapolation sweep
 * (columns pe,length,nll,ppl):
 *
 *   pelab plot lines --csv sweep.csv --x length --y ppl --group pe --logx --logy --png sweep.png
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "args.h"
#include "csv.h"
#include "plot.h"
#include "pelab/status.h"

static const struct pelab_optdef plot_options[] = {
    {"csv", PELAB_OPT_STR, "", 0, 0, NULL, "CSV file to read (required; - for standard input): a header line, "
     "then rows of comma-separated fields, no quoting"},
    {"x", PELAB_OPT_STR, "", 0, 0, NULL, "column of the x values (required)"},
    {"y", PELAB_OPT_STR, "", 0, 0, NULL, "column of the y values (required)"},
    {"group", PELAB_OPT_STR, "", 0, 0, NULL, "column whose values name the lines, one line per value in order of "
     "first appearance (none: one line)"},
    {"logx", PELAB_OPT_SWITCH, "off", 0, 0, NULL, "base-10 x axis (points with x <= 0 are left out)"},
    {"logy", PELAB_OPT_SWITCH, "off", 0, 0, NULL, "base-10 y axis (points with y <= 0 are left out)"},
    {"png", PELAB_OPT_STR, "", 0, 0, NULL, "PNG file to write (required; replaced atomically)"},
    {"title", PELAB_OPT_STR, "", 0, 0, NULL, "title above the plot (none: 'Y against X')"},
    {"width", PELAB_OPT_INT, "900", PELAB_PLOT_MIN_SIDE, PELAB_PLOT_MAX_SIDE, NULL, "image width in pixels"},
    {"height", PELAB_OPT_INT, "600", PELAB_PLOT_MIN_SIDE, PELAB_PLOT_MAX_SIDE, NULL, "image height in pixels"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

void pelab_cmd_plot_help(FILE *f) {
    struct pelab_group g = {"options", plot_options};
    fprintf(f, "usage: pelab plot lines --csv FILE --x COL --y COL [--group COL] [--logx] [--logy]\n"
               "                        --png FILE [--title TEXT] [--width N] [--height N]\n\n"
               "Draws column y against column x of a CSV file as a PNG, one line per value of the\n"
               "group column, each line's points joined in order of x; non-numeric x or y values are\n"
               "an error naming the line. An extrapolation sweep (columns pe,length,nll,ppl) is\n"
               "plotted with:\n"
               "  pelab plot lines --csv sweep.csv --x length --y ppl --group pe --logx --logy \\\n"
               "      --png sweep.png\n"
               "Needs a pelab built with cairo (Debian package libcairo2-dev).\n");
    pelab_args_help(f, &g, 1, NULL);
}

/* One line: the rows of one group value, sorted by x. */
struct line {
    const char *name;
    double *x, *y;
    int n;
};

struct point {
    double x, y;
    int row; /* keeps equal x in file order */
};

static int by_x(const void *a, const void *b) {
    const struct point *p = a, *q = b;
    if (p->x != q->x) return p->x < q->x ? -1 : 1;
    return p->row - q->row;
}

static int plot_lines_cmd(const struct pelab_opts *o) {
    const char *path = pelab_opt_str(o, plot_options, "csv"), *png = pelab_opt_str(o, plot_options, "png");
    const char *xname = pelab_opt_str(o, plot_options, "x"), *yname = pelab_opt_str(o, plot_options, "y");
    const char *gname = pelab_opt_str(o, plot_options, "group");
    if (!path[0]) return pelab_fail(PELAB_ERR_USAGE, "--csv FILE is required");
    if (!xname[0] || !yname[0]) return pelab_fail(PELAB_ERR_USAGE, "--x COL and --y COL are required");
    if (!png[0]) return pelab_fail(PELAB_ERR_USAGE, "--png FILE is required");
    if (!pelab_plot_available()) return pelab_plot_unavailable("--png");

    struct pelab_csv c;
    int rc = pelab_csv_read(&c, path);
    if (rc) return rc;
    int xc, yc, gc = -1;
    struct point *pts = malloc((size_t)c.rows * sizeof *pts);
    int *group = malloc((size_t)c.rows * sizeof *group); /* each row's line */
    struct line *lines = calloc((size_t)c.rows, sizeof *lines);
    struct pelab_plot_series *series = calloc((size_t)c.rows, sizeof *series);
    int n_lines = 0;
    if (!pts || !group || !lines || !series) rc = pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    if (!rc) rc = pelab_csv_need(&c, xname, "--x", &xc);
    if (!rc) rc = pelab_csv_need(&c, yname, "--y", &yc);
    if (!rc && gname[0]) rc = pelab_csv_need(&c, gname, "--group", &gc);
    for (int r = 0; !rc && r < c.rows; r++) {
        pts[r].row = r;
        if ((rc = pelab_csv_number(&c, r, xc, &pts[r].x)) || (rc = pelab_csv_number(&c, r, yc, &pts[r].y))) break;
        const char *name = gc >= 0 ? pelab_csv_cell(&c, r, gc) : yname;
        int g = 0;
        while (g < n_lines && strcmp(lines[g].name, name) != 0) g++;
        if (g == n_lines) lines[n_lines++].name = name;
        group[r] = g;
        lines[g].n++;
    }
    /* each line's points, sorted by x, into one buffer of (x, y) arrays */
    double *xy = rc ? NULL : malloc(2 * (size_t)c.rows * sizeof *xy);
    if (!rc && !xy) rc = pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    if (!rc) {
        double *next = xy;
        for (int g = 0; g < n_lines; g++) {
            int k = 0;
            struct point *mine = malloc((size_t)lines[g].n * sizeof *mine);
            if (!mine) {
                rc = pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
                break;
            }
            for (int r = 0; r < c.rows; r++)
                if (group[r] == g) mine[k++] = pts[r];
            qsort(mine, (size_t)k, sizeof *mine, by_x);
            lines[g].x = next, next += k;
            lines[g].y = next, next += k;
            for (int i = 0; i < k; i++) lines[g].x[i] = mine[i].x, lines[g].y[i] = mine[i].y;
            free(mine);
            series[g] = (struct pelab_plot_series){gc >= 0 ? lines[g].name : NULL, lines[g].x, lines[g].y, k};
        }
    }
    if (!rc) {
        char title[2 * 256 + 16];
        const char *t = pelab_opt_str(o, plot_options, "title");
        if (!t[0]) snprintf(title, sizeof title, "%s against %s", yname, xname), t = title;
        struct pelab_plot_panel panel = {NULL, xname, yname, pelab_opt_switch(o, plot_options, "logx"),
                                         pelab_opt_switch(o, plot_options, "logy"), series, n_lines};
        rc = pelab_plot_lines(png, (int)pelab_opt_int(o, plot_options, "width"),
                              (int)pelab_opt_int(o, plot_options, "height"), t, &panel, 1);
    }
    free(xy);
    free(series);
    free(lines);
    free(group);
    free(pts);
    pelab_csv_free(&c);
    return rc;
}

int pelab_cmd_plot(int argc, char **argv) {
    if (argc > 0 && (strcmp(argv[0], "-h") == 0 || strcmp(argv[0], "--help") == 0)) {
        pelab_cmd_plot_help(stdout);
        return PELAB_OK;
    }
    if (argc < 1 || strncmp(argv[0], "--", 2) == 0)
        return pelab_fail(PELAB_ERR_USAGE, "plot needs a kind of plot first: pelab plot lines --csv FILE ...");
    if (strcmp(argv[0], "lines") != 0)
        return pelab_fail(PELAB_ERR_USAGE, "plot: unknown kind of plot '%s' (known: lines)", argv[0]);
    struct pelab_group g = {"options", plot_options};
    static struct pelab_opts opts;
    int help;
    int rc = pelab_args_parse(argc - 1, argv + 1, &g, 1, &opts, &help);
    if (!rc) rc = pelab_args_check_only(&opts, plot_options, "plot");
    if (rc) return rc;
    if (help) {
        pelab_cmd_plot_help(stdout);
        return PELAB_OK;
    }
    return plot_lines_cmd(&opts);
}
