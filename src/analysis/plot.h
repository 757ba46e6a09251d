/* Log-log SVG plots with labelled points (src/analysis/plot.c). Internal. */
#ifndef MOEFUSE_PLOT_H
#define MOEFUSE_PLOT_H

#define MOE__PLOT_LINES 8
#define MOE__PLOT_LEGEND 6
#define MOE__PLOT_NOTES 6

typedef struct moe__plot_point {
    double x, y;     /* data coordinates, > 0 */
    char label[96];
    int color;       /* index into the palette */
} moe__plot_point;

typedef struct moe__plot_line {
    double x0, y0, x1, y1; /* data coordinates */
    int color, dashed;
    char label[96];
    double label_at;       /* where along the segment its label sits, 0..1 (0: the middle) */
} moe__plot_line;

typedef struct moe__plot {
    char title[160], subtitle[240], xlabel[96], ylabel[96];
    double xmin, xmax, ymin, ymax; /* data range of the axes (log scale) */
    const moe__plot_point *points;
    int npoints;
    int connect; /* draw a line through the points in order */
    moe__plot_line lines[MOE__PLOT_LINES];
    int nlines;
    struct {
        char text[48];
        int color;
    } legend[MOE__PLOT_LEGEND];
    int nlegend;
    char notes[MOE__PLOT_NOTES][160]; /* lines of text under the plot */
    int nnotes;
} moe__plot;

/* Whether p can be drawn: finite, positive axis limits (log axes), and every point and line
 * end finite and positive. Callers check it first and name the bad range. */
int moe__plot_drawable(const moe__plot *p);

/* The SVG document (malloc'd, NUL-terminated; the caller frees it), or NULL when out of memory
 * (or when p is not drawable). */
char *moe__plot_svg(const moe__plot *p);

#endif
