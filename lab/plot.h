/* lab/plot.h — PNG figures, drawn with cairo when the build has it (the Makefile finds it with
 * pkg-config; Debian package libcairo2-dev): line plots in a grid of panels, and heatmaps that
 * share one colour scale. Each file is replaced atomically (pelab/io.h). Without cairo every
 * drawing call fails with a message saying what to install.
 */
#ifndef PELAB_CLI_PLOT_H
#define PELAB_CLI_PLOT_H

/* 1 when this pelab draws PNGs, else 0. */
int pelab_plot_available(void);
/* PELAB_ERR_USAGE with "OPTION: this pelab was built without cairo; install libcairo2-dev …". */
int pelab_plot_unavailable(const char *option);

/* Figure sizes the commands accept, in pixels. */
#define PELAB_PLOT_MIN_SIDE 200
#define PELAB_PLOT_MAX_SIDE 8000

struct pelab_plot_series {
    const char *label;   /* legend text; the figure's legend reads panel 0's labels */
    const double *x, *y; /* (n,) points joined in order; a non-finite point, or one ≤ 0 on a log
                            axis, is left out and breaks the line */
    int n;
};

struct pelab_plot_panel {
    const char *title, *xlabel, *ylabel; /* may be NULL */
    int logx, logy;                      /* base-10 axes */
    const struct pelab_plot_series *series;
    int n_series;
    double shade_lo, shade_hi; /* a grey band over x in [lo, hi] behind the lines (e.g. the trained
                                * sizes); none unless lo < hi */
};

/* Panels in a grid as square as it goes (row by row), series i in the same colour in every
 * panel, one legend at the right when any series of panel 0 has a label. PELAB_ERR_RUNTIME
 * naming the path when the image cannot be made or written. */
int pelab_plot_lines(const char *path, int width, int height, const char *title,
                     const struct pelab_plot_panel *panels, int n_panels);

struct pelab_plot_matrix {
    const char *title, *xlabel, *ylabel; /* may be NULL */
    const double *z; /* (rows, cols): column c at x = c, row r at y = r (row 0 at the bottom);
                        a non-finite entry is drawn grey */
    int rows, cols;
};

/* Heatmaps side by side on one colour scale (viridis, from the least to the largest finite z of
 * all of them), with a colour bar titled `zlabel` at the right. */
int pelab_plot_heatmaps(const char *path, int width, int height, const char *title,
                        const char *zlabel, const struct pelab_plot_matrix *maps, int n_maps);

#endif
