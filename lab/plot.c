/* PNG figures with cairo: an image surface, cairo's toy text API for labels (fontconfig's
 * "sans-serif"), and cairo_surface_write_to_png_stream into an atomic file.
 *
 * Layout of a line-plot figure (pixels):  title on top; panels in a grid; in each panel a plot
 * area framed by tick labels and axis labels; the legend in a column at the right. A heatmap
 * figure: title; the maps side by side; a colour bar with its ticks and label at the right.
 * Axes: linear ticks at 1, 2 or 5 × 10^k steps; log axes at powers of ten (with 2 and 5 between
 * when the range spans less than two decades).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "plot.h"
#include "pelab/io.h"
#include "pelab/status.h"

int pelab_plot_unavailable(const char *option) {
    return pelab_fail(PELAB_ERR_USAGE, "%s: this pelab was built without cairo, so it draws no PNG; "
                      "install libcairo2-dev (apt-get install libcairo2-dev, or make deps) and rebuild",
                      option);
}

#ifndef PELAB_CAIRO

int pelab_plot_available(void) { return 0; }

int pelab_plot_lines(const char *path, int width, int height, const char *title,
                     const struct pelab_plot_panel *panels, int n_panels) {
    return pelab_plot_unavailable("--png");
}

int pelab_plot_heatmaps(const char *path, int width, int height, const char *title,
                        const char *zlabel, const struct pelab_plot_matrix *maps, int n_maps) {
    return pelab_plot_unavailable("--png");
}

#else

#include <cairo.h>
#include <fontconfig/fontconfig.h>

int pelab_plot_available(void) { return 1; }

#define PI 3.14159265358979323846
#define FONT_SIZE 12.0
#define TITLE_SIZE 15.0
#define MAX_TICKS 24

/* ---- figure: surface, text, file ------------------------------------------------------------ */

struct fig {
    cairo_surface_t *surface;
    cairo_t *cr;
};

/* Frees the figure, then cairo's font caches and fontconfig's configuration, so a figure leaves
 * nothing allocated (the sanitizers and valgrind see no leak); the next figure loads them again. */
static void fig_free(struct fig *f) {
    cairo_destroy(f->cr);
    cairo_surface_destroy(f->surface);
    cairo_debug_reset_static_data();
    FcFini();
}

static int fig_open(struct fig *f, const char *path, int width, int height) {
    f->surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height);
    f->cr = cairo_create(f->surface);
    cairo_status_t st = cairo_status(f->cr);
    if (st != CAIRO_STATUS_SUCCESS) {
        fig_free(f);
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: cannot make a %d×%d image: %s", path, width, height,
                          cairo_status_to_string(st));
    }
    cairo_set_source_rgb(f->cr, 1, 1, 1);
    cairo_paint(f->cr);
    cairo_select_font_face(f->cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(f->cr, FONT_SIZE);
    return PELAB_OK;
}

static cairo_status_t write_chunk(void *closure, const unsigned char *data, unsigned int length) {
    return fwrite(data, 1, length, closure) == length ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_WRITE_ERROR;
}

/* Writes the PNG atomically and frees the figure. */
static int fig_close(struct fig *f, const char *path) {
    cairo_surface_flush(f->surface);
    struct pelab_atomic_file af = {0};
    int rc = pelab_atomic_open(&af, path);
    cairo_status_t st = rc ? CAIRO_STATUS_SUCCESS : cairo_surface_write_to_png_stream(f->surface, write_chunk, af.f);
    fig_free(f);
    if (rc) return rc;
    if (st != CAIRO_STATUS_SUCCESS) {
        pelab_atomic_abort(&af);
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: writing the PNG failed: %s", path, cairo_status_to_string(st));
    }
    return pelab_atomic_commit(&af);
}

/* Draws s with its box's point (ax, ay) (fractions: 0 left/top, 0.5 centre, 1 right/bottom) at
 * (x, y); rotated a quarter turn anticlockwise when `vertical`. */
static void text(cairo_t *cr, double x, double y, const char *s, double ax, double ay, int vertical) {
    if (!s || !s[0]) return;
    cairo_text_extents_t e;
    cairo_text_extents(cr, s, &e);
    cairo_save(cr);
    cairo_translate(cr, x, y);
    if (vertical) cairo_rotate(cr, -PI / 2);
    cairo_move_to(cr, -ax * e.width - e.x_bearing, -ay * e.height - e.y_bearing);
    cairo_show_text(cr, s);
    cairo_restore(cr);
}

static double text_width(cairo_t *cr, const char *s) {
    cairo_text_extents_t e;
    cairo_text_extents(cr, s ? s : "", &e);
    return e.x_advance;
}

/* Bold text centred at x, its top at y, shrunk (down to 60 %) to fit in `room` pixels. */
static void title_text(cairo_t *cr, double x, double y, const char *s, double size, double room) {
    cairo_save(cr);
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD);
    cairo_set_font_size(cr, size);
    double w = text_width(cr, s);
    if (w > room) cairo_set_font_size(cr, fmax(0.6, room / w) * size);
    cairo_set_source_rgb(cr, 0, 0, 0);
    text(cr, x, y, s, 0.5, 0, 0);
    cairo_restore(cr);
}

/* ---- axes --------------------------------------------------------------------------------------- */

/* An axis maps values in [lo, hi] (log10 of them on a log axis) onto pixels [p0, p1]. */
struct axis {
    double lo, hi;
    int log;
    double p0, p1;
};

/* Differences are taken of halves (exact), so a range of -1e308..1e308 does not overflow. */
static double axis_px(const struct axis *a, double v) {
    double u = a->log ? log10(v) : v;
    return a->p0 + (0.5 * u - 0.5 * a->lo) / (0.5 * a->hi - 0.5 * a->lo) * (a->p1 - a->p0);
}

/* The smallest of 1, 2, 5 × 10^k at least `raw`. */
static double nice_step(double raw) {
    double p = pow(10, floor(log10(raw))), m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

/* Tick values (not logs) inside the axis range, at most MAX_TICKS; returns their count. */
static int axis_ticks(const struct axis *a, double *ticks, int target) {
    int n = 0;
    if (a->log) {
        static const double mult[] = {1, 2, 5};
        int dense = a->hi - a->lo < 2; /* under two decades: 1, 2, 5 of each */
        for (double k = floor(a->lo); k <= ceil(a->hi) && n < MAX_TICKS; k++)
            for (int m = 0; m < (dense ? 3 : 1) && n < MAX_TICKS; m++) {
                double u = k + log10(mult[m]);
                if (u >= a->lo - 1e-9 && u <= a->hi + 1e-9) ticks[n++] = pow(10, u);
            }
        if (n >= 2) return n;
        n = 0; /* less than a decade's worth: linear ticks between the values */
        double vlo = pow(10, a->lo), vhi = pow(10, a->hi), step = nice_step((vhi - vlo) / target);
        for (double v = ceil(vlo / step) * step; v <= vhi * (1 + 1e-9) && n < MAX_TICKS; v += step) ticks[n++] = v;
        return n;
    }
    double step = fmin(nice_step((0.5 * a->hi - 0.5 * a->lo) / target * 2), DBL_MAX);
    for (double k = ceil(a->lo / step - 1e-9); n < MAX_TICKS; k++) {
        double v = k * step; /* not a running sum: no drift, and no overflow near DBL_MAX */
        if (!(v <= a->hi + step * 1e-9)) break;
        ticks[n++] = fabs(v) < step * 1e-9 ? 0 : v;
    }
    return n;
}

/* Range [lo, hi] of an axis from the data's extremes (logs on a log axis), widened when flat,
 * padded by `pad` of the span on each side. */
static void axis_range(struct axis *a, double lo, double hi, int any, double pad) {
    if (!any) lo = 0, hi = 1;
    if (a->log && any) lo = log10(lo), hi = log10(hi);
    if (0.5 * hi - 0.5 * lo < 0.5e-12 * fmax(1, fabs(hi))) {
        double w = a->log ? 0.5 : fmax(fabs(hi) * 0.1, 0.5);
        lo -= w, hi += w;
    }
    /* Half the span, padded; the ends are kept finite when the data reach ±DBL_MAX. */
    double half = 0.5 * hi - 0.5 * lo;
    a->lo = fmax(lo - 2 * pad * half, -DBL_MAX);
    a->hi = fmin(hi + 2 * pad * half, DBL_MAX);
}

/* Labels of ticks t[0..n-1] with as many significant digits (4 to 17) as it takes for
 * neighbouring labels to differ: 1 and 1.0000000001 do not both read "1". */
#define LABEL_MAX 32
static void tick_labels(const double *t, int n, char (*buf)[LABEL_MAX]) {
    for (int digits = 4; digits <= 17; digits++) {
        int distinct = 1;
        for (int i = 0; i < n; i++) {
            snprintf(buf[i], LABEL_MAX, "%.*g", digits, t[i]);
            if (i && strcmp(buf[i], buf[i - 1]) == 0) distinct = 0;
        }
        if (distinct) return;
    }
}

/* Frame, grid and tick labels of a plot area x0..x1 (left to right) × y0..y1 (bottom to top). */
static void draw_axes(cairo_t *cr, const struct axis *ax, const struct axis *ay) {
    double xt[MAX_TICKS], yt[MAX_TICKS];
    int nx = axis_ticks(ax, xt, 6), ny = axis_ticks(ay, yt, 5);
    char xl[MAX_TICKS][LABEL_MAX], yl[MAX_TICKS][LABEL_MAX];
    tick_labels(xt, nx, xl);
    tick_labels(yt, ny, yl);
    cairo_set_line_width(cr, 1);
    for (int i = 0; i < nx; i++) {
        double px = round(axis_px(ax, xt[i])) + 0.5;
        cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
        cairo_move_to(cr, px, ay->p0);
        cairo_line_to(cr, px, ay->p1);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0, 0, 0);
        text(cr, px, ay->p0 + 5, xl[i], 0.5, 0, 0);
    }
    for (int i = 0; i < ny; i++) {
        double py = round(axis_px(ay, yt[i])) + 0.5;
        cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
        cairo_move_to(cr, ax->p0, py);
        cairo_line_to(cr, ax->p1, py);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0, 0, 0);
        text(cr, ax->p0 - 5, py, yl[i], 1, 0.5, 0);
    }
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_rectangle(cr, ax->p0 + 0.5, ay->p1 + 0.5, ax->p1 - ax->p0, ay->p0 - ay->p1);
    cairo_stroke(cr);
}

/* ---- line plots ------------------------------------------------------------------------------- */

/* Ten distinguishable colours; beyond ten, the cycle repeats dashed. */
static const double palette[10][3] = {
    {0.12, 0.47, 0.71}, {1.00, 0.50, 0.05}, {0.17, 0.63, 0.17}, {0.84, 0.15, 0.16}, {0.58, 0.40, 0.74},
    {0.55, 0.34, 0.29}, {0.89, 0.47, 0.76}, {0.50, 0.50, 0.50}, {0.74, 0.74, 0.13}, {0.09, 0.75, 0.81},
};

static void series_style(cairo_t *cr, int i) {
    const double *c = palette[i % 10];
    cairo_set_source_rgb(cr, c[0], c[1], c[2]);
    cairo_set_line_width(cr, 1.8);
    static const double dash[] = {6, 3};
    cairo_set_dash(cr, dash, (i / 10) % 2 ? 2 : 0, 0);
}

static int point_ok(const struct pelab_plot_panel *p, double x, double y) {
    return isfinite(x) && isfinite(y) && (!p->logx || x > 0) && (!p->logy || y > 0);
}

/* One panel in the cell (x, y, w, h). */
static void draw_panel(cairo_t *cr, const struct pelab_plot_panel *p, double x, double y, double w, double h) {
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    for (int s = 0; s < p->n_series; s++)
        for (int i = 0; i < p->series[s].n; i++) {
            double vx = p->series[s].x[i], vy = p->series[s].y[i];
            if (!point_ok(p, vx, vy)) continue;
            xlo = fmin(xlo, vx), xhi = fmax(xhi, vx), ylo = fmin(ylo, vy), yhi = fmax(yhi, vy);
        }
    int any = xlo <= xhi;
    /* room for the y tick labels, the axis labels and the panel's title */
    struct axis ax = {.log = p->logx, .p0 = x + 72, .p1 = x + w - 14};
    struct axis ay = {.log = p->logy, .p0 = y + h - 44, .p1 = y + (p->title ? 26 : 12)};
    axis_range(&ax, xlo, xhi, any, 0.02);
    axis_range(&ay, ylo, yhi, any, 0.05);
    /* wider y tick labels (many digits) push the plot area right, up to half the panel */
    double yt[MAX_TICKS];
    char yl[MAX_TICKS][LABEL_MAX];
    int ny = axis_ticks(&ay, yt, 5);
    tick_labels(yt, ny, yl);
    for (int i = 0; i < ny; i++) ax.p0 = fmax(ax.p0, fmin(x + text_width(cr, yl[i]) + 30, x + w / 2));
    draw_axes(cr, &ax, &ay);
    cairo_set_source_rgb(cr, 0, 0, 0);
    if (p->title) title_text(cr, (ax.p0 + ax.p1) / 2, y + 6, p->title, FONT_SIZE + 1, w);
    if (p->xlabel) text(cr, (ax.p0 + ax.p1) / 2, y + h - 6, p->xlabel, 0.5, 1, 0);
    if (p->ylabel) text(cr, x + 6, (ay.p0 + ay.p1) / 2, p->ylabel, 0.5, 0, 1);

    cairo_save(cr);
    cairo_rectangle(cr, ax.p0, ay.p1, ax.p1 - ax.p0, ay.p0 - ay.p1);
    cairo_clip(cr);
    if (p->shade_lo < p->shade_hi && (!p->logx || p->shade_hi > 0)) {
        const double x0 = axis_px(&ax, p->logx ? fmax(p->shade_lo, 1e-300) : p->shade_lo);
        const double x1 = axis_px(&ax, p->shade_hi);
        cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
        cairo_rectangle(cr, fmin(x0, x1), ay.p1, fabs(x1 - x0), ay.p0 - ay.p1);
        cairo_fill(cr);
    }
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
    for (int s = 0; s < p->n_series; s++) {
        const struct pelab_plot_series *se = &p->series[s];
        series_style(cr, s);
        int open = 0;
        for (int i = 0; i < se->n; i++) {
            if (!point_ok(p, se->x[i], se->y[i])) {
                open = 0;
                continue;
            }
            double px = axis_px(&ax, se->x[i]), py = axis_px(&ay, se->y[i]);
            if (open) cairo_line_to(cr, px, py);
            else cairo_move_to(cr, px, py);
            open = 1;
        }
        cairo_stroke(cr);
        if (se->n <= 40) /* few points: mark each, so a single point shows too */
            for (int i = 0; i < se->n; i++) {
                if (!point_ok(p, se->x[i], se->y[i])) continue;
                cairo_new_sub_path(cr);
                cairo_arc(cr, axis_px(&ax, se->x[i]), axis_px(&ay, se->y[i]), 2.8, 0, 2 * PI);
                cairo_fill(cr);
            }
    }
    cairo_restore(cr);
}

int pelab_plot_lines(const char *path, int width, int height, const char *title,
                     const struct pelab_plot_panel *panels, int n_panels) {
    PELAB_ASSERT(n_panels >= 1);
    struct fig f;
    int rc = fig_open(&f, path, width, height);
    if (rc) return rc;
    cairo_t *cr = f.cr;
    double top = title ? 34 : 6;
    if (title) title_text(cr, width / 2.0, 10, title, TITLE_SIZE, width - 16);

    /* legend: panel 0's labels in a column at the right */
    const struct pelab_plot_panel *p0 = &panels[0];
    double legend_w = 0;
    for (int s = 0; s < p0->n_series; s++)
        if (p0->series[s].label) legend_w = fmax(legend_w, text_width(cr, p0->series[s].label) + 44);
    legend_w = fmin(legend_w, width / 3.0);
    if (legend_w > 0)
        for (int s = 0; s < p0->n_series; s++) {
            double ly = top + 20 + 18 * s;
            if (ly > height - 10) break;
            double lx = width - legend_w + 8;
            series_style(cr, s);
            cairo_move_to(cr, lx, ly);
            cairo_line_to(cr, lx + 24, ly);
            cairo_stroke(cr);
            cairo_set_source_rgb(cr, 0, 0, 0);
            text(cr, lx + 30, ly, p0->series[s].label ? p0->series[s].label : "", 0, 0.5, 0);
        }
    cairo_set_dash(cr, NULL, 0, 0);

    int cols = (int)ceil(sqrt((double)n_panels)), rows = (n_panels + cols - 1) / cols;
    double cw = (width - legend_w) / cols, ch = (height - top) / rows;
    for (int i = 0; i < n_panels; i++)
        draw_panel(cr, &panels[i], (i % cols) * cw, top + (i / cols) * ch, cw, ch);
    return fig_close(&f, path);
}

/* ---- heatmaps ---------------------------------------------------------------------------------- */

/* viridis at nine evenly spaced points, interpolated linearly between them */
static void viridis(double u, double *rgb) {
    static const double stops[9][3] = {
        {0.267, 0.005, 0.329}, {0.279, 0.175, 0.483}, {0.230, 0.322, 0.546},
        {0.173, 0.449, 0.558}, {0.128, 0.567, 0.551}, {0.157, 0.684, 0.502},
        {0.369, 0.789, 0.383}, {0.678, 0.864, 0.189}, {0.993, 0.906, 0.144},
    };
    u = u < 0 ? 0 : u > 1 ? 1 : u;
    double s = u * 8;
    int i = s >= 8 ? 7 : (int)s;
    double t = s - i;
    for (int c = 0; c < 3; c++) rgb[c] = stops[i][c] * (1 - t) + stops[i + 1][c] * t;
}

/* Integer ticks 0..n-1 at most ~`target` of them, at cell centres. */
static void index_ticks(cairo_t *cr, int n, int target, double p0, double p1, double at, int vertical) {
    int step = (int)nice_step(fmax(1.0, (double)n / target));
    char buf[16];
    for (int i = 0; i < n; i += step) {
        double p = p0 + (i + 0.5) / n * (p1 - p0);
        snprintf(buf, sizeof buf, "%d", i);
        if (vertical) text(cr, at - 5, p, buf, 1, 0.5, 0);
        else text(cr, p, at + 5, buf, 0.5, 0, 0);
    }
}

int pelab_plot_heatmaps(const char *path, int width, int height, const char *title,
                        const char *zlabel, const struct pelab_plot_matrix *maps, int n_maps) {
    PELAB_ASSERT(n_maps >= 1);
    double zlo = INFINITY, zhi = -INFINITY;
    for (int m = 0; m < n_maps; m++)
        for (long i = 0; i < (long)maps[m].rows * maps[m].cols; i++)
            if (isfinite(maps[m].z[i])) zlo = fmin(zlo, maps[m].z[i]), zhi = fmax(zhi, maps[m].z[i]);
    struct axis az = {0};
    axis_range(&az, zlo, zhi, zlo <= zhi, 0);

    struct fig f;
    int rc = fig_open(&f, path, width, height);
    if (rc) return rc;
    cairo_t *cr = f.cr;
    double top = title ? 34 : 6;
    if (title) title_text(cr, width / 2.0, 10, title, TITLE_SIZE, width - 16);

    const double bar_w = 110; /* colour bar, its ticks and its label */
    const double cw = (width - bar_w) / n_maps;
    double y0 = top + 24, y1 = height - 44; /* plot area top and bottom */
    for (int m = 0; m < n_maps; m++) {
        const struct pelab_plot_matrix *mp = &maps[m];
        double x0 = m * cw + 64, x1 = (m + 1) * cw - 12;
        for (int r = 0; r < mp->rows; r++)
            for (int c = 0; c < mp->cols; c++) {
                double z = mp->z[(long)r * mp->cols + c], rgb[3] = {0.8, 0.8, 0.8};
                if (isfinite(z)) viridis((z - az.lo) / (az.hi - az.lo), rgb);
                cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
                /* cells snapped to whole pixels, so neighbours leave no seams */
                double cx0 = round(x0 + (x1 - x0) * c / mp->cols), cx1 = round(x0 + (x1 - x0) * (c + 1) / mp->cols);
                double cy0 = round(y1 - (y1 - y0) * (r + 1) / mp->rows), cy1 = round(y1 - (y1 - y0) * r / mp->rows);
                cairo_rectangle(cr, cx0, cy0, cx1 - cx0, cy1 - cy0);
                cairo_fill(cr);
            }
        cairo_set_source_rgb(cr, 0, 0, 0);
        cairo_set_line_width(cr, 1);
        cairo_rectangle(cr, round(x0) - 0.5, round(y0) - 0.5, round(x1) - round(x0) + 1, round(y1) - round(y0) + 1);
        cairo_stroke(cr);
        index_ticks(cr, mp->cols, (int)fmax(2, (x1 - x0) / 40), x0, x1, y1, 0);
        index_ticks(cr, mp->rows, (int)fmax(2, (y1 - y0) / 24), y1, y0, x0, 1);
        if (mp->title) title_text(cr, (x0 + x1) / 2, top + 4, mp->title, FONT_SIZE + 1, cw);
        if (mp->xlabel) text(cr, (x0 + x1) / 2, height - 6, mp->xlabel, 0.5, 1, 0);
        if (mp->ylabel) text(cr, m * cw + 6, (y0 + y1) / 2, mp->ylabel, 0.5, 0, 1);
    }

    /* colour bar: 256 strips from the least value (bottom) to the largest (top) */
    double bx0 = width - bar_w + 10, bx1 = bx0 + 18;
    for (int i = 0; i < 256; i++) {
        double rgb[3];
        viridis((i + 0.5) / 256, rgb);
        cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
        double ya = y1 - (y1 - y0) * (i + 1) / 256, yb = y1 - (y1 - y0) * i / 256;
        cairo_rectangle(cr, bx0, floor(ya), bx1 - bx0, ceil(yb) - floor(ya));
        cairo_fill(cr);
    }
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_rectangle(cr, bx0 - 0.5, round(y0) - 0.5, bx1 - bx0 + 1, round(y1) - round(y0) + 1);
    cairo_stroke(cr);
    az.p0 = y1, az.p1 = y0;
    double zt[MAX_TICKS];
    char zl[MAX_TICKS][LABEL_MAX];
    int nz = axis_ticks(&az, zt, 6);
    tick_labels(zt, nz, zl);
    for (int i = 0; i < nz; i++) {
        double py = round(axis_px(&az, zt[i])) + 0.5;
        cairo_move_to(cr, bx1, py);
        cairo_line_to(cr, bx1 + 4, py);
        cairo_stroke(cr);
        text(cr, bx1 + 7, py, zl[i], 0, 0.5, 0);
    }
    if (zlabel) text(cr, width - 6, (y0 + y1) / 2, zlabel, 0.5, 1, 1);
    return fig_close(&f, path);
}

#endif
