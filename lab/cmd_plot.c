/* pelab plot lines: a PNG line plot of two columns of a CSV file, one line per value of a group
 * column. This is how tables from other commands become figures, e.g. an extrapolation sweep
 * (columns pe,length,nll,ppl):
 *
 *   pelab plot lines --csv sweep.csv --x length --y ppl --group pe --logx --logy --png sweep.png
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "args.h"
#include "lab.h"
#include "csv.h"
#include "plot.h"
#include "pelab/status.h"

static const struct pelab_optdef plot_options[] = {
    {"csv", PELAB_OPT_STR, "", 0, 0, NULL, "CSV file to read (required; - for standard input): a header line, "
     "then rows of comma-separated cells (RFC 4180: a cell holding a comma, quote or line break is quoted)"},
    {"x", PELAB_OPT_STR, "", 0, 0, NULL, "column of the x values (required)"},
    {"y", PELAB_OPT_STR, "", 0, 0, NULL, "column of the y values (required)"},
    {"group", PELAB_OPT_STR, "", 0, 0, NULL, "column whose values name the lines, one line per value (at most 100) "
     "in order of first appearance (none: one line)"},
    {"logx", PELAB_OPT_SWITCH, "off", 0, 0, NULL, "base-10 x axis (points with x <= 0 are left out)"},
    {"logy", PELAB_OPT_SWITCH, "off", 0, 0, NULL, "base-10 y axis (points with y <= 0 are left out)"},
    {"png", PELAB_OPT_STR, "", 0, 0, NULL, "PNG file to write (required; replaced atomically)"},
    {"title", PELAB_OPT_STR, "", 0, 0, NULL, "title above the plot (none: 'Y against X')"},
    {"xlabel", PELAB_OPT_STR, "", 0, 0, NULL, "x-axis label (none: the x column's name)"},
    {"ylabel", PELAB_OPT_STR, "", 0, 0, NULL, "y-axis label (none: the y column's name)"},
    {"width", PELAB_OPT_INT, "900", PELAB_PLOT_MIN_SIDE, PELAB_PLOT_MAX_SIDE, NULL, "image width in pixels"},
    {"height", PELAB_OPT_INT, "600", PELAB_PLOT_MIN_SIDE, PELAB_PLOT_MAX_SIDE, NULL, "image height in pixels"},
    {"shade", PELAB_OPT_STR, "", 0, 0, NULL,
     "X0,X1: a grey band over x from X0 to X1 behind the lines, e.g. the trained sizes of an "
     "algorithmic task (empty: no band)"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

void pelab_cmd_plot_help(FILE *f) {
    struct pelab_group g = {"options", plot_options};
    fprintf(f, "usage: pelab plot lines --csv FILE --x COL --y COL [--group COL] [--logx] [--logy]\n"
               "                        --png FILE [--title TEXT] [--xlabel TEXT] [--ylabel TEXT]\n"
               "                        [--width N] [--height N]\n\n"
               "Draws column y against column x of a CSV file as a PNG, one line per value of the\n"
               "group column, each line's points joined in order of x; non-numeric x or y values are\n"
               "an error naming the line. An extrapolation sweep (columns pe,length,nll,ppl) is\n"
               "plotted with:\n"
               "  pelab plot lines --csv sweep.csv --x length --y ppl --group pe --logx --logy \\\n"
               "      --png sweep.png\n"
               "and a comparison on an algorithmic task trained on sizes 1..10 (compare's sizes.csv):\n"
               "  pelab plot lines --csv sizes.csv --x size --y em_mean --group pe --shade 1,10 \\\n"
               "      --png sizes.png\n"
               "Needs a pelab built with cairo (Debian package libcairo2-dev).\n");
    pelab_args_help(f, &g, 1, NULL);
}

#define MAX_LINES 100 /* more would be unreadable, and the legend could not hold them */

struct point {
    double x, y;
    int line, row; /* sorted by line, then x, then file order */
};

static int by_line_x(const void *a, const void *b) {
    const struct point *p = a, *q = b;
    if (p->line != q->line) return p->line - q->line;
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
    double shade[2] = {0, 0};
    const char *band = pelab_opt_str(o, plot_options, "shade");
    int used = 0;
    if (band[0] && (sscanf(band, "%lf,%lf%n", &shade[0], &shade[1], &used) != 2 || band[used] ||
                    !isfinite(shade[0]) || !isfinite(shade[1]) || shade[0] >= shade[1]))
        return pelab_fail(PELAB_ERR_USAGE, "--shade '%s': give X0,X1 with X0 below X1 (e.g. 1,10)", band);

    struct pelab_csv c;
    int rc = pelab_csv_read(&c, path);
    if (rc) return rc;
    int xc, yc, gc = -1, n_lines = 0;
    const char *names[MAX_LINES];
    struct pelab_plot_series series[MAX_LINES];
    struct point *pts = malloc((size_t)c.rows * sizeof *pts);
    double *xy = malloc(2 * (size_t)c.rows * sizeof *xy); /* each line's x values, then its y */
    if (!pts || !xy) rc = pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    if (!rc) rc = pelab_csv_need(&c, xname, "--x", &xc);
    if (!rc) rc = pelab_csv_need(&c, yname, "--y", &yc);
    if (!rc && gname[0]) rc = pelab_csv_need(&c, gname, "--group", &gc);
    for (int r = 0; !rc && r < c.rows; r++) {
        struct point *p = &pts[r];
        if ((rc = pelab_csv_number(&c, r, xc, &p->x)) || (rc = pelab_csv_number(&c, r, yc, &p->y))) break;
        const char *name = gc >= 0 ? pelab_csv_cell(&c, r, gc) : yname;
        p->row = r;
        p->line = 0;
        while (p->line < n_lines && strcmp(names[p->line], name) != 0) p->line++;
        if (p->line == MAX_LINES)
            rc = pelab_fail(PELAB_ERR_USAGE, "--group: column '%s' of %s has more than %d values; "
                            "a plot of so many lines is unreadable", gname, c.path, MAX_LINES);
        else if (p->line == n_lines) names[n_lines++] = name;
    }
    if (!rc) { /* a figure of no point is no figure */
        int logx = pelab_opt_switch(o, plot_options, "logx");
        int logy = pelab_opt_switch(o, plot_options, "logy");
        int usable = 0;
        for (int r = 0; r < c.rows && !usable; r++)
            usable = isfinite(pts[r].x) && isfinite(pts[r].y) && (!logx || pts[r].x > 0) &&
                     (!logy || pts[r].y > 0);
        static const char *const log_rule[4] = {"", " with x above 0 (--logx)",
                                                " with y above 0 (--logy)",
                                                " above 0 (--logx, --logy)"};
        if (!usable)
            rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: none of its %d rows has a finite '%s' and "
                            "'%s'%s: there is nothing to plot", c.path, c.rows, xname, yname,
                            log_rule[logx + 2 * logy]);
    }
    if (!rc) {
        qsort(pts, (size_t)c.rows, sizeof *pts, by_line_x);
        double *next = xy;
        for (int r = 0, g = 0; g < n_lines; g++) {
            struct pelab_plot_series *se = &series[g];
            *se = (struct pelab_plot_series){gc >= 0 ? names[g] : NULL, next, NULL, 0};
            while (r + se->n < c.rows && pts[r + se->n].line == g) se->n++;
            se->y = next + se->n;
            for (int i = 0; i < se->n; i++, r++) next[i] = pts[r].x, next[se->n + i] = pts[r].y;
            next += 2 * se->n;
        }
        char title[2 * PELAB_OPT_VAL_MAX + 16];
        const char *t = pelab_opt_str(o, plot_options, "title");
        if (!t[0]) snprintf(title, sizeof title, "%s against %s", yname, xname), t = title;
        const char *xl = pelab_opt_str(o, plot_options, "xlabel"), *yl = pelab_opt_str(o, plot_options, "ylabel");
        struct pelab_plot_panel panel = {NULL, xl[0] ? xl : xname, yl[0] ? yl : yname,
                                         pelab_opt_switch(o, plot_options, "logx"),
                                         pelab_opt_switch(o, plot_options, "logy"), series, n_lines,
                                         shade[0], shade[1]};
        rc = pelab_plot_lines(png, (int)pelab_opt_int(o, plot_options, "width"),
                              (int)pelab_opt_int(o, plot_options, "height"), t, &panel, 1);
    }
    free(xy);
    free(pts);
    pelab_csv_free(&c);
    return rc;
}

int pelab_cmd_plot(struct pelab_ctx *ctx, int argc, char **argv) {
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
