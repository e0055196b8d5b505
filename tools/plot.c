/* plot.c: SVG and PNG output of a log-log chart (see plot.h). The PNG is 8-bit RGB, stored
 * (uncompressed) deflate blocks inside zlib, with its CRC32 and Adler-32 computed here. */
#include "plot.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define W 900
#define H 600
#define ML 90 /* margins: left, right, top, bottom */
#define MR 160
#define MT 50
#define MB 70

static double px(const plot *p, double x) {
    return ML + (log10(x) - log10(p->xmin)) / (log10(p->xmax) - log10(p->xmin)) * (W - ML - MR);
}
static double py(const plot *p, double y) {
    return H - MB - (log10(y) - log10(p->ymin)) / (log10(p->ymax) - log10(p->ymin)) * (H - MT - MB);
}

/* ---- SVG ------------------------------------------------------------------------------------ */

static void esc(FILE *f, const char *s) {
    for (; s && *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else fputc(*s, f);
    }
}

static bool write_svg(const plot *p, FILE *f) {
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" font-size=\"12\">\n", W, H);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, H);
    fprintf(f, "<text x=\"%d\" y=\"28\" font-size=\"16\">", ML);
    esc(f, p->title);
    fputs("</text>\n", f);
    /* decade grid */
    for (double d = pow(10, floor(log10(p->xmin))); d <= p->xmax * 1.0001; d *= 10) {
        if (d < p->xmin * 0.9999) continue;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>\n", px(p, d), MT, px(p, d), H - MB);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n", px(p, d), H - MB + 18, d);
    }
    for (double d = pow(10, floor(log10(p->ymin))); d <= p->ymax * 1.0001; d *= 10) {
        if (d < p->ymin * 0.9999) continue;
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", ML, py(p, d), W - MR, py(p, d));
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", ML - 6, py(p, d) + 4, d);
    }
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"black\"/>\n", ML, MT, W - ML - MR,
            H - MT - MB);
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">", (ML + W - MR) / 2, H - 20);
    esc(f, p->xlabel);
    fprintf(f, "</text>\n<text transform=\"translate(22,%d) rotate(-90)\" text-anchor=\"middle\">", (MT + H - MB) / 2);
    esc(f, p->ylabel);
    fputs("</text>\n", f);
    for (size_t i = 0; i < p->n_lines; i++) {
        const plot_line *l = &p->lines[i];
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#%06x\" stroke-width=\"2\"/>\n",
                px(p, l->x0), py(p, l->y0), px(p, l->x1), py(p, l->y1), l->rgb);
        if (l->label) {
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#%06x\">", px(p, l->x1) + 6, py(p, l->y1) + 4, l->rgb);
            esc(f, l->label);
            fputs("</text>\n", f);
        }
    }
    for (size_t i = 0; i < p->n_points; i++) {
        const plot_point *q = &p->points[i];
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"#%06x\"/>\n", px(p, q->x), py(p, q->y), q->rgb);
        if (q->label) {
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" fill=\"#%06x\">", px(p, q->x) + 6, py(p, q->y) - 5, q->rgb);
            esc(f, q->label);
            fputs("</text>\n", f);
        }
    }
    fputs("</svg>\n", f);
    return !ferror(f);
}

/* ---- PNG ------------------------------------------------------------------------------------ */

/* 5x7 glyphs for the printable ASCII the charts use (others draw as blanks): 7 rows of 5 bits. */
static const struct {
    char c;
    uint8_t row[7];
} FONT[] = {
    {'0', {14, 17, 19, 21, 25, 17, 14}}, {'1', {4, 12, 4, 4, 4, 4, 14}},     {'2', {14, 17, 1, 2, 4, 8, 31}},
    {'3', {31, 2, 4, 2, 1, 17, 14}},     {'4', {2, 6, 10, 18, 31, 2, 2}},    {'5', {31, 16, 30, 1, 1, 17, 14}},
    {'6', {6, 8, 16, 30, 17, 17, 14}},   {'7', {31, 1, 2, 4, 8, 8, 8}},      {'8', {14, 17, 17, 14, 17, 17, 14}},
    {'9', {14, 17, 17, 15, 1, 2, 12}},   {'.', {0, 0, 0, 0, 0, 12, 12}},     {'-', {0, 0, 0, 31, 0, 0, 0}},
    {'_', {0, 0, 0, 0, 0, 0, 31}},       {'/', {1, 1, 2, 4, 8, 16, 16}},     {'%', {24, 25, 2, 4, 8, 19, 3}},
    {'(', {2, 4, 8, 8, 8, 4, 2}},        {')', {8, 4, 2, 2, 2, 4, 8}},       {':', {0, 12, 12, 0, 12, 12, 0}},
    {',', {0, 0, 0, 0, 12, 4, 8}},       {'=', {0, 0, 31, 0, 31, 0, 0}},     {'+', {0, 4, 4, 31, 4, 4, 0}},
    {'x', {0, 0, 17, 10, 4, 10, 17}},    {'a', {0, 0, 14, 1, 15, 17, 15}},   {'b', {16, 16, 22, 25, 17, 17, 30}},
    {'c', {0, 0, 14, 16, 16, 17, 14}},   {'d', {1, 1, 13, 19, 17, 17, 15}},  {'e', {0, 0, 14, 17, 31, 16, 14}},
    {'f', {6, 9, 8, 28, 8, 8, 8}},       {'g', {0, 15, 17, 17, 15, 1, 14}},  {'h', {16, 16, 22, 25, 17, 17, 17}},
    {'i', {4, 0, 12, 4, 4, 4, 14}},      {'j', {2, 0, 6, 2, 2, 18, 12}},     {'k', {16, 16, 18, 20, 24, 20, 18}},
    {'l', {12, 4, 4, 4, 4, 4, 14}},      {'m', {0, 0, 26, 21, 21, 17, 17}},  {'n', {0, 0, 22, 25, 17, 17, 17}},
    {'o', {0, 0, 14, 17, 17, 17, 14}},   {'p', {0, 0, 30, 17, 30, 16, 16}},  {'q', {0, 0, 13, 19, 15, 1, 1}},
    {'r', {0, 0, 22, 25, 16, 16, 16}},   {'s', {0, 0, 14, 16, 14, 1, 30}},   {'t', {8, 8, 28, 8, 8, 9, 6}},
    {'u', {0, 0, 17, 17, 17, 19, 13}},   {'v', {0, 0, 17, 17, 17, 10, 4}},   {'w', {0, 0, 17, 17, 21, 21, 10}},
    {'y', {0, 0, 17, 17, 15, 1, 14}},    {'z', {0, 0, 31, 2, 4, 8, 31}},     {'A', {14, 17, 17, 31, 17, 17, 17}},
    {'B', {30, 17, 17, 30, 17, 17, 30}}, {'C', {14, 17, 16, 16, 16, 17, 14}}, {'D', {28, 18, 17, 17, 17, 18, 28}},
    {'E', {31, 16, 16, 30, 16, 16, 31}}, {'F', {31, 16, 16, 30, 16, 16, 16}}, {'G', {14, 17, 16, 23, 17, 17, 15}},
    {'I', {14, 4, 4, 4, 4, 4, 14}},      {'L', {16, 16, 16, 16, 16, 16, 31}}, {'M', {17, 27, 21, 21, 17, 17, 17}},
    {'N', {17, 17, 25, 21, 19, 17, 17}}, {'O', {14, 17, 17, 17, 17, 17, 14}}, {'P', {30, 17, 17, 30, 16, 16, 16}},
    {'Q', {14, 17, 17, 17, 21, 18, 13}}, {'R', {30, 17, 17, 30, 20, 18, 17}}, {'S', {15, 16, 16, 14, 1, 1, 30}},
    {'T', {31, 4, 4, 4, 4, 4, 4}},       {'U', {17, 17, 17, 17, 17, 17, 14}}, {'V', {17, 17, 17, 17, 17, 10, 4}},
    {'W', {17, 17, 17, 21, 21, 21, 10}}, {'K', {17, 18, 20, 24, 20, 18, 17}}, {'H', {17, 17, 17, 31, 17, 17, 17}},
};

typedef struct canvas {
    uint8_t *px; /* [H][W][3] */
} canvas;

static void put(canvas *c, int x, int y, unsigned rgb) {
    if (x < 0 || y < 0 || x >= W || y >= H) return;
    uint8_t *p = c->px + ((size_t)y * W + (size_t)x) * 3;
    p[0] = (uint8_t)(rgb >> 16), p[1] = (uint8_t)(rgb >> 8), p[2] = (uint8_t)rgb;
}

static void line(canvas *c, double x0, double y0, double x1, double y1, unsigned rgb, int thick) {
    double dx = x1 - x0, dy = y1 - y0, n = fmax(fabs(dx), fabs(dy));
    for (int i = 0; i <= (int)n; i++) {
        double t = n > 0 ? i / n : 0;
        int x = (int)lround(x0 + t * dx), y = (int)lround(y0 + t * dy);
        for (int a = 0; a < thick; a++)
            for (int b = 0; b < thick; b++) put(c, x + a, y + b, rgb);
    }
}

static void text(canvas *c, int x, int y, const char *s, unsigned rgb) {
    for (; s && *s; s++, x += 6) {
        for (size_t g = 0; g < sizeof FONT / sizeof *FONT; g++) {
            if (FONT[g].c != *s) continue;
            for (int r = 0; r < 7; r++)
                for (int b = 0; b < 5; b++)
                    if (FONT[g].row[r] & (16 >> b)) put(c, x + b, y + r, rgb);
            break;
        }
    }
}

static uint32_t crc_table[256];
static void crc_init(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[n] = c;
    }
}
static uint32_t crc(uint32_t c, const uint8_t *p, size_t n) {
    c ^= 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) c = crc_table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

static void be32(uint8_t *p, uint32_t v) { p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v; }

static bool chunk(FILE *f, const char *type, const uint8_t *data, size_t n) {
    uint8_t hdr[8];
    be32(hdr, (uint32_t)n);
    memcpy(hdr + 4, type, 4);
    uint32_t c = crc(crc(0, hdr + 4, 4), data, n);
    uint8_t tail[4];
    be32(tail, c);
    return fwrite(hdr, 1, 8, f) == 8 && fwrite(data, 1, n, f) == n && fwrite(tail, 1, 4, f) == 4;
}

static bool write_png(const canvas *c, FILE *f) {
    crc_init();
    const size_t row = (size_t)W * 3 + 1, raw_n = row * H;
    uint8_t *raw = malloc(raw_n);
    /* zlib: header, stored blocks of at most 65535 bytes, Adler-32 */
    size_t blocks = (raw_n + 65534) / 65535, z_n = 2 + raw_n + blocks * 5 + 4;
    uint8_t *z = malloc(z_n);
    if (!raw || !z) {
        free(raw);
        free(z);
        return false;
    }
    for (int y = 0; y < H; y++) {
        raw[(size_t)y * row] = 0; /* filter: none */
        memcpy(raw + (size_t)y * row + 1, c->px + (size_t)y * W * 3, (size_t)W * 3);
    }
    size_t o = 0;
    z[o++] = 0x78, z[o++] = 0x01;
    uint32_t a = 1, b = 0;
    for (size_t i = 0; i < raw_n; i += 65535) {
        size_t n = raw_n - i < 65535 ? raw_n - i : 65535;
        z[o++] = i + n == raw_n;
        z[o++] = (uint8_t)n, z[o++] = (uint8_t)(n >> 8), z[o++] = (uint8_t)~n, z[o++] = (uint8_t)(~n >> 8);
        memcpy(z + o, raw + i, n);
        o += n;
        for (size_t k = 0; k < n; k++) a = (a + raw[i + k]) % 65521, b = (b + a) % 65521;
    }
    be32(z + o, (b << 16) | a);
    o += 4;
    static const uint8_t sig[8] = {137, 80, 78, 71, 13, 10, 26, 10};
    uint8_t ihdr[13];
    be32(ihdr, W), be32(ihdr + 4, H);
    ihdr[8] = 8, ihdr[9] = 2, ihdr[10] = 0, ihdr[11] = 0, ihdr[12] = 0;
    bool ok = fwrite(sig, 1, 8, f) == 8 && chunk(f, "IHDR", ihdr, 13) && chunk(f, "IDAT", z, o) && chunk(f, "IEND", NULL, 0);
    free(raw);
    free(z);
    return ok;
}

static bool draw_png(const plot *p, FILE *f) {
    canvas c = {malloc((size_t)W * H * 3)};
    if (!c.px) return false;
    memset(c.px, 255, (size_t)W * H * 3);
    text(&c, ML, 20, p->title, 0);
    char buf[32];
    for (double d = pow(10, floor(log10(p->xmin))); d <= p->xmax * 1.0001; d *= 10) {
        if (d < p->xmin * 0.9999) continue;
        line(&c, px(p, d), MT, px(p, d), H - MB, 0xdddddd, 1);
        snprintf(buf, sizeof buf, "%g", d);
        text(&c, (int)px(p, d) - 3 * (int)strlen(buf), H - MB + 8, buf, 0);
    }
    for (double d = pow(10, floor(log10(p->ymin))); d <= p->ymax * 1.0001; d *= 10) {
        if (d < p->ymin * 0.9999) continue;
        line(&c, ML, py(p, d), W - MR, py(p, d), 0xdddddd, 1);
        snprintf(buf, sizeof buf, "%g", d);
        text(&c, ML - 8 - 6 * (int)strlen(buf), (int)py(p, d) - 3, buf, 0);
    }
    line(&c, ML, MT, W - MR, MT, 0, 1), line(&c, ML, H - MB, W - MR, H - MB, 0, 1);
    line(&c, ML, MT, ML, H - MB, 0, 1), line(&c, W - MR, MT, W - MR, H - MB, 0, 1);
    text(&c, (ML + W - MR) / 2 - 3 * (int)strlen(p->xlabel ? p->xlabel : ""), H - 30, p->xlabel, 0);
    text(&c, 4, MT - 14, p->ylabel, 0);
    for (size_t i = 0; i < p->n_lines; i++) {
        const plot_line *l = &p->lines[i];
        line(&c, px(p, l->x0), py(p, l->y0), px(p, l->x1), py(p, l->y1), l->rgb, 2);
        if (l->label) text(&c, (int)px(p, l->x1) + 6, (int)py(p, l->y1) - 3, l->label, l->rgb);
    }
    for (size_t i = 0; i < p->n_points; i++) {
        const plot_point *q = &p->points[i];
        int x = (int)px(p, q->x), y = (int)py(p, q->y);
        for (int a = -3; a <= 3; a++)
            for (int b = -3; b <= 3; b++)
                if (a * a + b * b <= 10) put(&c, x + a, y + b, q->rgb);
        if (q->label) text(&c, x + 6, y - 10, q->label, q->rgb);
    }
    bool ok = write_png(&c, f);
    free(c.px);
    return ok;
}

bool plot_write(const plot *p, const char *path, char *err, size_t err_len) {
    size_t n = strlen(path);
    bool svg = n > 4 && !strcmp(path + n - 4, ".svg"), png = n > 4 && !strcmp(path + n - 4, ".png");
    if (!svg && !png) {
        snprintf(err, err_len, "%s: the plot file must end in .svg or .png", path);
        return false;
    }
    if (!(p->xmin > 0 && p->xmax > p->xmin && p->ymin > 0 && p->ymax > p->ymin)) {
        snprintf(err, err_len, "nothing to plot (empty axis ranges)");
        return false;
    }
    FILE *f = fopen(path, "wb");
    if (!f) {
        snprintf(err, err_len, "cannot write %s", path);
        return false;
    }
    bool ok = svg ? write_svg(p, f) : draw_png(p, f);
    if (fclose(f) != 0) ok = false;
    if (!ok) snprintf(err, err_len, "writing %s failed", path);
    return ok;
}
