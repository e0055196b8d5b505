/* plot.h: a small chart writer for `bert8 bench --roofline --plot`: log-log axes, lines and
 * labelled points, written as SVG or as PNG (rasterised here with a built-in 5x7 font, so no
 * graphics library is needed). */
#ifndef BERT8_PLOT_H
#define BERT8_PLOT_H

#include <stdbool.h>
#include <stddef.h>

typedef struct plot_line {
    double x0, y0, x1, y1; /* data coordinates */
    unsigned rgb;
    const char *label; /* drawn at the line's end, or NULL */
} plot_line;

typedef struct plot_point {
    double x, y;
    unsigned rgb;
    const char *label;
} plot_point;

typedef struct plot {
    const char *title, *xlabel, *ylabel;
    double xmin, xmax, ymin, ymax; /* log axes: all > 0 */
    const plot_line *lines;
    size_t n_lines;
    const plot_point *points;
    size_t n_points;
} plot;

/* Writes the chart to path (".svg" or ".png" decides the format). false with a message in err. */
bool plot_write(const plot *p, const char *path, char *err, size_t err_len);

#endif
