/* test_swap_quant_layout: host only (no GPU), in CI. The index functions that the swapped decode
 * kernel's A2 quantiser (decode_swap_kernel.cuh, QUANT) runs on are checked against the
 * fragment layout they come from. The layout: consumer thread (warpgroup half, warp, lane) holds
 * weight rows 64 half + 16 warp + lane/4 (+ 8) of a 128-row tile, and plan rows
 * 8j + 2(lane % 4) (+ 1) of the 32-row block.
 *  - Every (block row, A2 column) of a 128-column group is held by exactly one (thread, value):
 *    gated (two tiles a group, or the last group's one), RELU2 (one tile).
 *  - A gated value's column is the GLU of its weight row (even) and the next (odd) row, held
 *    by lane ^ 4, the kernel's shuffle partner.
 *  - The row maximum's reduction (xor 4, 8, 16) spans the lanes holding the row; lanes 0-3 write
 *    the 32 rows of a warp once each; swap_row_slot / swap_row_quad invert swap_target_row.
 * The checker is run on planted wrong column maps too: it must reject each. The layout itself
 * (weight_row below) is written here from wgmma's m64nNk32 accumulator fragment, not taken from the
 * kernel. Not covered here (the GPU suite's fp8-swap-a2-* cases and fp8-swap-a2-bitexact are):
 * the values (swap_a2_values), the first tile's values held through the second, the group index,
 * the width of a last group, the scale stores.
 *   ctest -R test_swap_quant_layout */
#include <stdio.h>
#include <string.h>

#include "../harness.h" // CHECK and the totals, as the CPU tests have them
#include "hopper/decode_swap_kernel.cuh"

using namespace moe_hopper;

typedef int (*col_fn)(bool gated, int tile_in_unit, int half, int warp, int lane, int s);

static int kernel_col(bool gated, int t, int half, int warp, int lane, int s) {
    return swap_quant_col(gated, t, half, warp, lane, s);
}
// Planted faults: a column map the checker must reject.
static int planted_swap_s(bool gated, int t, int half, int warp, int lane, int s) {
    return swap_quant_col(gated, t, half, warp, lane, 1 - s);
}
static int planted_odd_quads(bool gated, int t, int half, int warp, int lane, int s) {
    if (!gated) return swap_quant_col(gated, t, half, warp, lane, s);
    return 64 * t + 32 * half + 8 * warp + (lane / 4) / 2 + 4 * s; // odd quads too: duplicates
}
static int planted_tile(bool gated, int t, int half, int warp, int lane, int s) {
    return swap_quant_col(gated, 0, half, warp, lane, s); // the second tile on the first's columns
}

// Weight row (0 .. 127 of the tile) of value s of a thread: the fragment layout.
static int weight_row(int half, int warp, int lane, int s) { return 64 * half + 16 * warp + lane / 4 + 8 * s; }

// Returns the number of faults found for one group shape (tiles: 1 or 2 W13 tiles; gated or not).
static int check_cover(col_fn col, bool gated, int tiles, bool report) {
    int faults = 0;
    const int width = gated ? 64 * tiles : 128; // A2 columns the group's tiles make
    static int seen[SWAP_NT][128];
    memset(seen, 0, sizeof seen);
    for (int t = 0; t < tiles; ++t)
        for (int half = 0; half < 2; ++half)
            for (int warp = 0; warp < 4; ++warp)
                for (int lane = 0; lane < 32; ++lane)
                    for (int i = 0; i < SWAP_NT / 4; ++i)
                        for (int s = 0; s < 2; ++s) {
                            const int c = col(gated, t, half, warp, lane, s);
                            const int w = weight_row(half, warp, lane, s);
                            if (c < 0) {
                                // Only a gated tile's up rows (odd weight rows) hold nothing.
                                if (!gated || w % 2 == 0) {
                                    faults++;
                                    if (report) printf("  no column for a value that has one (w %d)\n", w);
                                }
                                continue;
                            }
                            if (c >= width) {
                                faults++;
                                if (report) printf("  column %d past the group's %d\n", c, width);
                                continue;
                            }
                            // The value's column from the layout: gated, GLU(w, w + 1) of the
                            // interleaved rows is A2 column (128 t + w) / 2; RELU2, the row itself.
                            const int want = gated ? (128 * t + w) / 2 : w;
                            if (gated && w % 2) {
                                faults++;
                                if (report) printf("  an up row (w %d) holds column %d\n", w, c);
                            }
                            if (c != want) {
                                faults++;
                                if (report) printf("  thread (%d,%d,%d) s %d: column %d, layout says %d\n", half, warp, lane, s, c, want);
                            }
                            // The up partner of a gate row is 4 lanes away (the kernel's shuffle).
                            if (gated && weight_row(half, warp, lane ^ 4, s) != w + 1) faults++;
                            seen[swap_target_row(0, lane, i)][c]++;
                        }
    for (int r = 0; r < SWAP_NT; ++r)
        for (int c = 0; c < width; ++c)
            if (seen[r][c] != 1) {
                faults++;
                if (report && faults < 8) printf("  row %d column %d held %d times\n", r, c, seen[r][c]);
            }
    return faults;
}

static void check_rows(void) {
    // Inverse maps, and which lanes hold a row.
    for (int r = 0; r < SWAP_NT; ++r)
        for (int lane = 0; lane < 32; ++lane)
            for (int i = 0; i < SWAP_NT / 4; ++i) {
                const bool holds = swap_target_row(0, lane, i) == r;
                const bool said = lane % 4 == swap_row_quad(r) && i == swap_row_slot(r);
                CHECK(holds == said, "row %d lane %d slot %d: holds %d, inverse says %d", r, lane, i, holds, said);
            }
    // The xor 4, 8, 16 butterfly from any lane reaches exactly the lanes with its lane % 4.
    for (int lane = 0; lane < 32; ++lane) {
        unsigned reach = 1u << lane;
        for (int o = 4; o < 32; o *= 2) {
            unsigned next = reach;
            for (int l = 0; l < 32; ++l)
                if (reach >> l & 1u) next |= 1u << (l ^ o);
            reach = next;
        }
        unsigned want = 0;
        for (int l = 0; l < 32; ++l)
            if (l % 4 == lane % 4) want |= 1u << l;
        CHECK(reach == want, "lane %d: the butterfly reaches %08x, the row's lanes are %08x", lane, reach, want);
    }
    // Lanes 0-3 write each of the warp's 32 rows once.
    int writes[SWAP_NT] = {0};
    for (int lane = 0; lane < 4; ++lane)
        for (int i = 0; i < SWAP_NT / 4; ++i) writes[swap_target_row(0, lane, i)]++;
    for (int r = 0; r < SWAP_NT; ++r) CHECK(writes[r] == 1, "row %d written %d times into red", r, writes[r]);
}

int main(void) {
    check_rows();
    const struct { bool gated; int tiles; const char *what; } shapes[] = {
        {true, 2, "gated, two tiles"}, {true, 1, "gated, the last group's one tile"}, {false, 1, "relu2"}};
    for (const auto &sh : shapes) {
        const int f = check_cover(kernel_col, sh.gated, sh.tiles, true);
        CHECK(f == 0, "%s: %d faults in the kernel's column map", sh.what, f);
    }
    // The checker itself: each planted map must be caught on some shape.
    const struct { col_fn fn; const char *what; } planted[] = {
        {planted_swap_s, "values s swapped"}, {planted_odd_quads, "odd quads hold columns"},
        {planted_tile, "second tile on the first's columns"}};
    for (const auto &pl : planted) {
        int f = 0;
        for (const auto &sh : shapes) f += check_cover(pl.fn, sh.gated, sh.tiles, false);
        CHECK(f > 0, "planted fault not caught: %s", pl.what);
    }
    printf("test_swap_quant_layout: ");
    return harness_finish(checks_passed, checks_failed);
}
