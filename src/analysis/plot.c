/* Hand-written SVG for log-log plots with labelled points. Labels are placed greedily: each
 * tries positions around its point at growing distances and takes the first that overlaps no
 * other label, marker, line label or the plot's edge; a label that finds no place becomes a
 * number with its text in a footnote under the plot. */
#include "plot.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PI 3.14159265358979323846

/* ---- a growing string ------------------------------------------------------------------ */
typedef struct sbuf {
    char *data;
    size_t len, cap;
    int failed;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void sb_printf(sbuf *b, const char *fmt, ...) {
    if (b->failed) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->data ? b->data + b->len : NULL, b->data ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = 1;
            return;
        }
        if (b->data && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap : 4096;
        while (cap <= b->len + (size_t)n) cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d) {
            b->failed = 1;
            return;
        }
        b->data = d;
        b->cap = cap;
    }
}

/* Text as SVG character data. */
static void sb_text(sbuf *b, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '<': sb_printf(b, "&lt;"); break;
        case '>': sb_printf(b, "&gt;"); break;
        case '&': sb_printf(b, "&amp;"); break;
        case '"': sb_printf(b, "&quot;"); break;
        default: sb_printf(b, "%c", *s);
        }
    }
}

/* ---- geometry -------------------------------------------------------------------------- */
typedef struct box {
    double x0, y0, x1, y1;
} box;

static int overlaps(box a, box b) { return a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1; }
static int inside(box a, box outer) { return a.x0 >= outer.x0 && a.x1 <= outer.x1 && a.y0 >= outer.y0 && a.y1 <= outer.y1; }

#define FONT 11.0
#define TEXT_H (FONT + 2.0)

/* Advance widths of DejaVu Sans in em (the font the SVG asks for first; Liberation Sans and
 * Arial are narrower), so estimated boxes hold the rendered text. */
static double char_em(unsigned char c) {
    static const char *const narrow = "ijl.,:;'|!I ", *const semi = "ft()[]{}-/r\\\"";
    if (strchr(narrow, c)) return 0.32;
    if (strchr(semi, c)) return 0.41;
    if (c == 'm' || c == 'w' || c == 'M' || c == 'W' || c == '%') return 1.0;
    if (c == '+' || c == '=' || c == '<' || c == '>') return 0.84;
    if (c >= 'A' && c <= 'Z') return 0.79;
    if (c >= '0' && c <= '9') return 0.64;
    return 0.64; /* lower case and the rest */
}
static double text_width(const char *s, double font) {
    double em = 0;
    for (; *s; s++) em += char_em((unsigned char)*s);
    return em * font * 1.03;
}

static const char *const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#555555"};
static const char *color(int i) { return colors[(i < 0 ? 0 : i) % 6]; }

typedef struct frame {
    double left, top, width, height; /* plot area in pixels */
    double lx0, lx1, ly0, ly1;       /* log10 of the data range */
} frame;

static double px(const frame *f, double x) { return f->left + (log10(x) - f->lx0) / (f->lx1 - f->lx0) * f->width; }
static double py(const frame *f, double y) { return f->top + f->height - (log10(y) - f->ly0) / (f->ly1 - f->ly0) * f->height; }

/* "0.01", "1", "1000", "1e+06" */
static void tick_text(double v, char *buf, size_t size) {
    if (v >= 1e-3 && v < 1e6) snprintf(buf, size, "%g", v);
    else snprintf(buf, size, "1e%d", (int)lround(log10(v)));
}

/* ---- label placement ------------------------------------------------------------------- */
typedef struct segment {
    double x0, y0, x1, y1;
} segment;

/* Obstacles: boxes (labels; markers, which leaders may cross) and segments (lines, leaders). */
typedef struct placer {
    box *boxes;
    unsigned char *is_marker;
    int n, cap;
    segment *segs;
    int nseg, segcap;
    box area;
} placer;

static int placer_add_box(placer *p, box b, int marker) {
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 64;
        box *nb = realloc(p->boxes, (size_t)cap * sizeof *nb);
        if (!nb) return 0;
        p->boxes = nb;
        unsigned char *nm = realloc(p->is_marker, (size_t)cap);
        if (!nm) return 0;
        p->is_marker = nm;
        p->cap = cap;
    }
    p->is_marker[p->n] = (unsigned char)marker;
    p->boxes[p->n++] = b;
    return 1;
}
static int placer_add(placer *p, box b) { return placer_add_box(p, b, 0); }

static int placer_add_segment(placer *p, segment s) {
    if (p->nseg == p->segcap) {
        int cap = p->segcap ? 2 * p->segcap : 64;
        segment *ns = realloc(p->segs, (size_t)cap * sizeof *ns);
        if (!ns) return 0;
        p->segs = ns;
        p->segcap = cap;
    }
    p->segs[p->nseg++] = s;
    return 1;
}

/* Whether segment s passes through box b (Liang-Barsky clipping). */
static int segment_hits(segment s, box b) {
    double t0 = 0, t1 = 1, dx = s.x1 - s.x0, dy = s.y1 - s.y0;
    double pk[4] = {-dx, dx, -dy, dy}, qk[4] = {s.x0 - b.x0, b.x1 - s.x0, s.y0 - b.y0, b.y1 - s.y0};
    for (int i = 0; i < 4; i++) {
        if (pk[i] == 0) {
            if (qk[i] < 0) return 0;
            continue;
        }
        double t = qk[i] / pk[i];
        if (pk[i] < 0) t0 = fmax(t0, t);
        else t1 = fmin(t1, t);
        if (t0 > t1) return 0;
    }
    return 1;
}

/* Whether box b is inside the area and clear of every obstacle (but segment `skip`, -1: none). */
static int placer_free_except(const placer *p, box b, int skip) {
    if (!inside(b, p->area)) return 0;
    for (int i = 0; i < p->n; i++)
        if (overlaps(b, p->boxes[i])) return 0;
    for (int i = 0; i < p->nseg; i++)
        if (i != skip && segment_hits(p->segs[i], b)) return 0;
    return 1;
}
static int placer_free_at(const placer *p, box b) { return placer_free_except(p, b, -1); }

/* A leader from a point to its label must not cross a label already placed (it may pass
 * over another point's marker: the marker stays on top and the leader stays traceable). */
static int leader_clear(const placer *p, segment s) {
    for (int i = 0; i < p->n; i++)
        if (!p->is_marker[i] && segment_hits(s, p->boxes[i])) return 0;
    return 1;
}

/* The leader of a label: from just outside the point's marker to the box edge nearest it. */
static segment leader_of(double x, double y, box b) {
    double ax = fmin(fmax(x, b.x0), b.x1), ay = fmin(fmax(y, b.y0), b.y1);
    double d = hypot(ax - x, ay - y);
    segment s = {x, y, ax, ay};
    if (d > 0) s.x0 = x + (ax - x) * 5.5 / d, s.y0 = y + (ay - y) * 5.5 / d;
    return s;
}

/* Finds a free box w x h near (x, y), trying positions around the point at growing
 * distances; a label away from its point gets a leader that must not cross another label
 * (unless !strict: the last resort). */
static int placer_find(const placer *p, double x, double y, double w, double h, int strict, box *out,
                       segment *leader) {
    static const double radii[] = {6, 12, 20, 30, 42, 56, 72, 90, 112, 136, 164, 196, 232, 272, 320, 380};
    for (size_t ri = 0; ri < sizeof radii / sizeof radii[0]; ri++) {
        for (int a = 0; a < 24; a++) {
            /* right first, then alternately above and below, ending left: readers look right of a
             * point first */
            int k = (a + 1) / 2, sign = (a % 2) ? 1 : -1;
            double th = sign * k * (2.0 * PI / 24.0), c = cos(th), s = sin(th);
            double cx = x + radii[ri] * c, cy = y - radii[ri] * s;
            box b;
            if (c > 0.35) b.x0 = cx;
            else if (c < -0.35) b.x0 = cx - w;
            else b.x0 = cx - w / 2;
            if (s > 0.35) b.y0 = cy - h;
            else if (s < -0.35) b.y0 = cy;
            else b.y0 = cy - h / 2;
            b.x1 = b.x0 + w;
            b.y1 = b.y0 + h;
            box padded = {b.x0 - 1.5, b.y0 - 1.5, b.x1 + 1.5, b.y1 + 1.5}; /* keep a hair of air around */
            if (!placer_free_at(p, padded)) continue;
            segment l = leader_of(x, y, b);
            if (strict && hypot(l.x1 - x, l.y1 - y) > 7 && !leader_clear(p, l)) continue;
            *out = b;
            *leader = l;
            return 1;
        }
    }
    return 0;
}

/* A deep copy of the obstacles (for trying a layout), and its release. */
static int placer_clone(placer *dst, const placer *src) {
    *dst = *src;
    dst->boxes = malloc((size_t)(src->cap > 0 ? src->cap : 1) * sizeof *dst->boxes);
    dst->is_marker = malloc((size_t)(src->cap > 0 ? src->cap : 1));
    dst->segs = malloc((size_t)(src->segcap > 0 ? src->segcap : 1) * sizeof *dst->segs);
    if (!dst->boxes || !dst->is_marker || !dst->segs) {
        free(dst->boxes), free(dst->is_marker), free(dst->segs);
        return 0;
    }
    if (src->n) memcpy(dst->boxes, src->boxes, (size_t)src->n * sizeof *src->boxes);
    if (src->n) memcpy(dst->is_marker, src->is_marker, (size_t)src->n);
    if (src->nseg) memcpy(dst->segs, src->segs, (size_t)src->nseg * sizeof *src->segs);
    return 1;
}
static void placer_release(placer *p) {
    free(p->boxes);
    free(p->is_marker);
    free(p->segs);
}

/* ---- the plot -------------------------------------------------------------------------- */

/* Tick values of a log axis from lo to hi (log10): decades, and 2 and 5 times them when the
 * axis spans few decades. */
static int ticks(double lo, double hi, double *out, int max) {
    int n = 0, fine = hi - lo < 2.5;
    for (double d = floor(lo); d <= ceil(hi) && n < max; d++) {
        const double mult[3] = {1, 2, 5};
        for (int m = 0; m < (fine ? 3 : 1) && n < max; m++) {
            double v = mult[m] * pow(10, d), lv = log10(v);
            if (lv >= lo - 1e-9 && lv <= hi + 1e-9) out[n++] = v;
        }
    }
    return n;
}

/* Places the point labels in the given order; a label with no room becomes "[k]" (footnote k,
 * foot[i] = k) or, with no room even for that, foot[i] = -k. Returns the number of footnotes
 * (-1 when out of memory) and adds up the leader lengths in *leaders when asked. */
static int place_points(const moe__plot *p, const frame *f, placer *pl, const int *order, box *lab, segment *lead,
                        int *foot, double *leaders) {
    int nfoot = 0;
    for (int oi = 0; oi < p->npoints; oi++) {
        int i = order[oi];
        double x = px(f, p->points[i].x), y = py(f, p->points[i].y);
        foot[i] = 0;
        int placed = placer_find(pl, x, y, text_width(p->points[i].label, FONT), TEXT_H, 1, &lab[i], &lead[i]);
        if (!placed) {
            foot[i] = ++nfoot;
            char num[16];
            snprintf(num, sizeof num, "[%d]", nfoot);
            placed = placer_find(pl, x, y, text_width(num, FONT), TEXT_H, 1, &lab[i], &lead[i]) ||
                     placer_find(pl, x, y, text_width(num, FONT), TEXT_H, 0, &lab[i], &lead[i]);
            if (!placed) foot[i] = -nfoot; /* nowhere at all: the footnote still names it */
        }
        if (!placed) continue;
        if (!placer_add(pl, lab[i]) || !placer_add_segment(pl, lead[i])) return -1;
        if (leaders) leaders[0] += hypot(lead[i].x1 - lead[i].x0, lead[i].y1 - lead[i].y0);
    }
    return nfoot;
}

static int positive_finite(double v) { return v > 0 && isfinite(v); }

int moe__plot_drawable(const moe__plot *p) {
    if (!positive_finite(p->xmin) || !positive_finite(p->xmax) || !positive_finite(p->ymin) ||
        !positive_finite(p->ymax))
        return 0;
    /* log10 of a finite positive double spans about 632 decades: the grid loops stay bounded. */
    for (int i = 0; i < p->npoints; i++)
        if (!positive_finite(p->points[i].x) || !positive_finite(p->points[i].y)) return 0;
    for (int i = 0; i < p->nlines; i++) {
        const moe__plot_line *L = &p->lines[i];
        if (!positive_finite(L->x0) || !positive_finite(L->y0) || !positive_finite(L->x1) || !positive_finite(L->y1))
            return 0;
    }
    return 1;
}

char *moe__plot_svg(const moe__plot *p) {
    if (!moe__plot_drawable(p)) return NULL; /* an infinite or zero limit would never end the grid loops */
    const double W = 1000, left = 92, right = 28, top = 84, plot_h = 540;
    frame f = {left, top, W - left - right, plot_h, log10(p->xmin), log10(p->xmax), log10(p->ymin), log10(p->ymax)};
    if (!(f.lx1 > f.lx0)) f.lx1 = f.lx0 + 1;
    if (!(f.ly1 > f.ly0)) f.ly1 = f.ly0 + 1;
    box area = {f.left + 2, f.top + 2, f.left + f.width - 2, f.top + f.height - 2};

    placer pl = {NULL, NULL, 0, 0, NULL, 0, 0, area};
    int n = p->npoints;
    size_t alloc_n = (size_t)(n > 0 ? n : 1);
    box *lab = calloc(alloc_n, sizeof *lab);
    segment *lead = calloc(alloc_n, sizeof *lead);
    int *foot = calloc(alloc_n, sizeof *foot); /* 0: labelled in place; k > 0: "[k]" in place; -k: no room */
    char *svg = NULL;
    sbuf b = {0};
    if (!lab || !lead || !foot) goto done;

    /* Obstacles first: markers, lines, line labels (each slid along its line until it fits). */
    for (int i = 0; i < n; i++) {
        double x = px(&f, p->points[i].x), y = py(&f, p->points[i].y);
        placer_add_box(&pl, (box){x - 4.5, y - 4.5, x + 4.5, y + 4.5}, 1);
    }
    if (p->connect)
        for (int i = 0; i + 1 < n; i++)
            placer_add_segment(&pl, (segment){px(&f, p->points[i].x), py(&f, p->points[i].y),
                                              px(&f, p->points[i + 1].x), py(&f, p->points[i + 1].y)});
    segment line_seg[MOE__PLOT_LINES];
    int line_seg_index[MOE__PLOT_LINES];
    for (int i = 0; i < p->nlines; i++) { /* the lines, clipped to the plot area, are obstacles */
        const moe__plot_line *L = &p->lines[i];
        double x0 = px(&f, L->x0), y0 = py(&f, L->y0), x1 = px(&f, L->x1), y1 = py(&f, L->y1);
        segment seg = {fmax(x0, f.left), y0, fmin(x1, f.left + f.width), y1};
        if (x1 != x0) {
            seg.y0 = y0 + (y1 - y0) * (seg.x0 - x0) / (x1 - x0);
            seg.y1 = y0 + (y1 - y0) * (seg.x1 - x0) / (x1 - x0);
        }
        line_seg[i] = seg;
        line_seg_index[i] = pl.nseg;
        placer_add_segment(&pl, seg);
    }

    /* Point labels: the greedy placement is tried in a few orders (most crowded first, left to
     * right, right to left, top to bottom) and the layout with the fewest footnotes (then the
     * shortest leaders) is kept. */
    int *order = calloc(alloc_n * 4, sizeof *order);
    double *key = calloc(alloc_n, sizeof *key);
    if (!order || !key) {
        free(order);
        free(key);
        goto done;
    }
    for (int o = 0; o < 4; o++) {
        int *ord = order + (size_t)o * alloc_n;
        for (int i = 0; i < n; i++) {
            double x = px(&f, p->points[i].x), y = py(&f, p->points[i].y);
            ord[i] = i;
            if (o == 0) { /* crowding: neighbours within 60 px, most first */
                key[i] = 0;
                for (int j = 0; j < n; j++)
                    key[i] -= hypot(x - px(&f, p->points[j].x), y - py(&f, p->points[j].y)) < 60;
            } else {
                key[i] = o == 1 ? x : o == 2 ? -x : y;
            }
        }
        for (int i = 1; i < n; i++) /* stable insertion sort by key, ascending */
            for (int j = i; j > 0 && key[ord[j]] < key[ord[j - 1]]; j--) {
                int t = ord[j];
                ord[j] = ord[j - 1];
                ord[j - 1] = t;
            }
    }
    free(key);
    int best = 0, nfoot = 0;
    double best_score = INFINITY;
    for (int o = 0; o < 4; o++) {
        placer trial;
        if (!placer_clone(&trial, &pl)) break;
        double leaders = 0;
        int nf = place_points(p, &f, &trial, order + (size_t)o * alloc_n, lab, lead, foot, &leaders);
        placer_release(&trial);
        double score = nf * 1e6 + leaders;
        if (nf >= 0 && score < best_score) best_score = score, best = o;
    }
    nfoot = place_points(p, &f, &pl, order + (size_t)best * alloc_n, lab, lead, foot, NULL);
    free(order);
    if (nfoot < 0) goto done;

    /* Line labels last, slid along their line until they fit; one that does not fit goes to
     * the legend. */
    double line_lx[MOE__PLOT_LINES], line_ly[MOE__PLOT_LINES], line_angle[MOE__PLOT_LINES];
    int line_shown[MOE__PLOT_LINES] = {0};
    for (int i = 0; i < p->nlines; i++) {
        const moe__plot_line *L = &p->lines[i];
        if (!L->label[0]) continue;
        segment seg = line_seg[i];
        double ang = atan2(seg.y1 - seg.y0, seg.x1 - seg.x0), w = text_width(L->label, FONT), h = TEXT_H;
        double ox = sin(ang) * 5, oy = -cos(ang) * 5; /* just above the line */
        double cw = fabs(cos(ang)) * w + fabs(sin(ang)) * h, ch = fabs(sin(ang)) * w + fabs(cos(ang)) * h;
        double at0 = L->label_at > 0 ? L->label_at : 0.5;
        for (int step = 0; step <= 40 && !line_shown[i]; step++) {
            /* at0, then further back and forth along the line */
            double at = at0 + ((step % 2) ? -1 : 1) * ((step + 1) / 2) * 0.025;
            if (at < 0 || at > 1) continue;
            double lx = seg.x0 + (seg.x1 - seg.x0) * at + ox, ly = seg.y0 + (seg.y1 - seg.y0) * at + oy;
            /* the label runs from (lx, ly) along the line; its box after rotation */
            double cx = lx + cos(ang) * w / 2 + sin(ang) * h / 2, cy = ly + sin(ang) * w / 2 - cos(ang) * h / 2;
            box bb = {cx - cw / 2, cy - ch / 2, cx + cw / 2, cy + ch / 2};
            if (!placer_free_except(&pl, bb, line_seg_index[i])) continue;
            placer_add(&pl, bb);
            line_lx[i] = lx, line_ly[i] = ly, line_angle[i] = ang * 180.0 / PI;
            line_shown[i] = 1;
        }
    }

    double foot_y = top + plot_h + 62;
    int foot_cols = 2, foot_rows = (nfoot + foot_cols - 1) / foot_cols;
    double notes_y = foot_y + foot_rows * 15.0 + (foot_rows ? 6 : 0);
    double H = notes_y + p->nnotes * 15.0 + 10;

    sb_printf(&b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
                  "font-family=\"DejaVu Sans, Liberation Sans, Arial, sans-serif\" font-size=\"%.0f\">\n",
              W, H, W, H, FONT);
    sb_printf(&b, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    sb_printf(&b, "<text x=\"%.0f\" y=\"26\" font-size=\"16\" font-weight=\"bold\">", left);
    sb_text(&b, p->title);
    sb_printf(&b, "</text>\n<text x=\"%.0f\" y=\"46\" font-size=\"12\" fill=\"#333\">", left);
    sb_text(&b, p->subtitle);
    sb_printf(&b, "</text>\n");
    double lx = left; /* legend, one row above the plot */
    for (int i = 0; i < p->nlegend; i++) {
        sb_printf(&b, "<circle cx=\"%.1f\" cy=\"66\" r=\"4\" fill=\"%s\"/><text x=\"%.1f\" y=\"70\">", lx + 4,
                  color(p->legend[i].color), lx + 12);
        sb_text(&b, p->legend[i].text);
        sb_printf(&b, "</text>\n");
        lx += 24 + text_width(p->legend[i].text, FONT);
    }
    for (int i = 0; i < p->nlines; i++) { /* line labels that found no room on the plot */
        const moe__plot_line *L = &p->lines[i];
        if (!L->label[0] || line_shown[i]) continue;
        sb_printf(&b, "<line x1=\"%.1f\" y1=\"66\" x2=\"%.1f\" y2=\"66\" stroke=\"%s\" stroke-width=\"2\"%s/>"
                      "<text x=\"%.1f\" y=\"70\">",
                  lx, lx + 18, color(L->color), L->dashed ? " stroke-dasharray=\"4,3\"" : "", lx + 22);
        sb_text(&b, L->label);
        sb_printf(&b, "</text>\n");
        lx += 34 + text_width(L->label, FONT);
    }

    /* grid: light lines at 1..9 x each decade, darker at the labelled ticks */
    sb_printf(&b, "<g stroke=\"#ececec\" stroke-width=\"1\">\n");
    for (double d = floor(f.lx0); d <= ceil(f.lx1); d++)
        for (int m = 1; m < 10; m++) {
            double v = log10(m * pow(10, d));
            if (v <= f.lx0 || v >= f.lx1) continue;
            double x = px(&f, pow(10, v));
            sb_printf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", x, f.top, x, f.top + f.height);
        }
    for (double d = floor(f.ly0); d <= ceil(f.ly1); d++)
        for (int m = 1; m < 10; m++) {
            double v = log10(m * pow(10, d));
            if (v <= f.ly0 || v >= f.ly1) continue;
            double y = py(&f, pow(10, v));
            sb_printf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", f.left, y, f.left + f.width, y);
        }
    sb_printf(&b, "</g>\n");
    double tv[64];
    int nt = ticks(f.lx0, f.lx1, tv, 64);
    sb_printf(&b, "<g stroke=\"#c8c8c8\" stroke-width=\"1\">\n");
    for (int i = 0; i < nt; i++)
        sb_printf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", px(&f, tv[i]), f.top, px(&f, tv[i]),
                  f.top + f.height);
    double tyv[64];
    int nty = ticks(f.ly0, f.ly1, tyv, 64);
    for (int i = 0; i < nty; i++)
        sb_printf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", f.left, py(&f, tyv[i]),
                  f.left + f.width, py(&f, tyv[i]));
    sb_printf(&b, "</g>\n<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#333\"/>\n",
              f.left, f.top, f.width, f.height);
    for (int i = 0; i < nt; i++) {
        char t[32];
        tick_text(tv[i], t, sizeof t);
        sb_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", px(&f, tv[i]),
                  f.top + f.height + 16, t);
    }
    for (int i = 0; i < nty; i++) {
        char t[32];
        tick_text(tyv[i], t, sizeof t);
        sb_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", f.left - 6, py(&f, tyv[i]) + 4, t);
    }
    sb_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"13\">", f.left + f.width / 2,
              f.top + f.height + 40);
    sb_text(&b, p->xlabel);
    sb_printf(&b, "</text>\n<text transform=\"translate(%.1f,%.1f) rotate(-90)\" text-anchor=\"middle\" "
                  "font-size=\"13\">",
              24.0, f.top + f.height / 2);
    sb_text(&b, p->ylabel);
    sb_printf(&b, "</text>\n");

    /* lines, clipped to the plot area, and their labels */
    sb_printf(&b, "<clipPath id=\"plotarea\"><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/></clipPath>\n",
              f.left, f.top, f.width, f.height);
    sb_printf(&b, "<g clip-path=\"url(#plotarea)\" fill=\"none\">\n");
    for (int i = 0; i < p->nlines; i++) {
        const moe__plot_line *L = &p->lines[i];
        sb_printf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"%s/>\n",
                  px(&f, L->x0), py(&f, L->y0), px(&f, L->x1), py(&f, L->y1), color(L->color),
                  L->dashed ? " stroke-dasharray=\"6,4\"" : "");
    }
    if (p->connect && n > 1) {
        sb_printf(&b, "<polyline stroke=\"#999\" stroke-width=\"1.5\" points=\"");
        for (int i = 0; i < n; i++) sb_printf(&b, "%.1f,%.1f ", px(&f, p->points[i].x), py(&f, p->points[i].y));
        sb_printf(&b, "\"/>\n");
    }
    sb_printf(&b, "</g>\n");
    for (int i = 0; i < p->nlines; i++) {
        if (!line_shown[i]) continue;
        sb_printf(&b, "<text transform=\"translate(%.1f,%.1f) rotate(%.2f)\" fill=\"%s\">", line_lx[i], line_ly[i],
                  line_angle[i], color(p->lines[i].color));
        sb_text(&b, p->lines[i].label);
        sb_printf(&b, "</text>\n");
    }

    /* leaders, markers, labels */
    for (int i = 0; i < n; i++) {
        double x = px(&f, p->points[i].x), y = py(&f, p->points[i].y);
        if (foot[i] >= 0 && hypot(lead[i].x1 - x, lead[i].y1 - y) > 7)
            sb_printf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999\" stroke-width=\"0.8\"/>\n",
                      lead[i].x0, lead[i].y0, lead[i].x1, lead[i].y1);
    }
    for (int i = 0; i < n; i++) {
        double x = px(&f, p->points[i].x), y = py(&f, p->points[i].y);
        sb_printf(&b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\" stroke=\"white\" stroke-width=\"0.8\"/>\n",
                  x, y, color(p->points[i].color));
        if (foot[i] < 0) continue;
        sb_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#111\">", lab[i].x0, lab[i].y1 - 3.5);
        if (foot[i] > 0) sb_printf(&b, "[%d]", foot[i]);
        else sb_text(&b, p->points[i].label);
        sb_printf(&b, "</text>\n");
    }

    /* footnotes for labels that had no room, then the notes */
    for (int k = 0; k < nfoot; k++)
        for (int i = 0; i < n; i++) {
            if (abs(foot[i]) != k + 1) continue;
            double x = left + (k % foot_cols) * (f.width / foot_cols);
            sb_printf(&b, "<text x=\"%.1f\" y=\"%.1f\">[%d] ", x, foot_y + (k / foot_cols) * 15.0, k + 1);
            sb_text(&b, p->points[i].label);
            sb_printf(&b, "</text>\n");
        }
    for (int i = 0; i < p->nnotes; i++) {
        sb_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#444\">", left, notes_y + i * 15.0);
        sb_text(&b, p->notes[i]);
        sb_printf(&b, "</text>\n");
    }
    sb_printf(&b, "</svg>\n");
    if (!b.failed) {
        svg = b.data;
        b.data = NULL;
    }
done:
    free(b.data);
    free(pl.boxes);
    free(pl.is_marker);
    free(pl.segs);
    free(lab);
    free(lead);
    free(foot);
    return svg;
}
