/* --random-positions (src/posenc/random_positions.c): every row's positions are distinct, sorted
 * and inside [0, N), as many as the row's tokens before its padding, which repeats the last one;
 * a row's draw depends on its example index alone (not on the batch it is in); every k-subset of
 * [0, N) is equally likely (a chi-square test over the 10 subsets of 3 of 5); a row longer than N
 * is refused. */
#include <string.h>
#include "lib/check.h"
#include "pelab/posenc.h"
#include "pelab/status.h"

enum { PAD = 0 };

int main(void) {
    enum { B = 6, T = 9, N = 40 };
    int32_t tokens[B * T], pos[B * T], again[2 * T];
    for (int r = 0; r < B; r++) /* row r: r + 3 real tokens (capped at T), then padding */
        for (int t = 0; t < T; t++) tokens[r * T + t] = t < r + 3 ? 7 : PAD;
    CHECK(pelab_random_positions(pos, tokens, B, T, PAD, N, 99, 1000) == PELAB_OK, "%s", pelab_last_error());
    for (int r = 0; r < B; r++) {
        const int k = r + 3 < T ? r + 3 : T;
        for (int t = 0; t < T; t++) {
            const int32_t p = pos[r * T + t];
            CHECK(p >= 0 && p < N, "row %d position %d: %d", r, t, p);
            if (t > 0 && t < k) CHECK(p > pos[r * T + t - 1], "row %d: not increasing at %d", r, t);
            if (t >= k) CHECK(p == pos[r * T + k - 1], "row %d: padding at %d is %d", r, t, p);
        }
    }
    /* rows 2 and 3 drawn alone, as examples 1002 and 1003 of a batch of 2: the same positions */
    CHECK(pelab_random_positions(again, tokens + 2 * T, 2, T, PAD, N, 99, 1002) == PELAB_OK, "batch of 2");
    CHECK(!memcmp(again, pos + 2 * T, sizeof again), "a row's positions depend on its batch");
    CHECK(pelab_random_positions(again, tokens + 2 * T, 2, T, PAD, N, 98, 1002) == PELAB_OK &&
          memcmp(again, pos + 2 * T, sizeof again), "another key draws the same positions");

    /* uniform over the 10 subsets of 3 of 5: chi-square with 9 degrees of freedom below 27.9
     * (p = 0.001) */
    enum { DRAWS = 20000 };
    int32_t tok3[3] = {5, 5, 5}, p3[3];
    int count[32] = {0};
    for (int i = 0; i < DRAWS; i++) {
        pelab_random_positions(p3, tok3, 1, 3, PAD, 5, 7, (uint64_t)i);
        count[(1 << p3[0]) | (1 << p3[1]) | (1 << p3[2])]++;
    }
    double chi2 = 0;
    int subsets = 0;
    for (int m = 0; m < 32; m++)
        if (__builtin_popcount((unsigned)m) == 3) {
            subsets++;
            chi2 += (count[m] - DRAWS / 10.0) * (count[m] - DRAWS / 10.0) / (DRAWS / 10.0);
        } else {
            CHECK(count[m] == 0, "subset %#x of %d positions drawn", m, __builtin_popcount((unsigned)m));
        }
    CHECK(subsets == 10 && chi2 < 27.9, "chi-square %.1f over %d subsets", chi2, subsets);

    CHECK(pelab_random_positions(pos, tokens, B, T, PAD, 6, 99, 0) == PELAB_ERR_USAGE &&
          strstr(pelab_last_error(), "--random-positions 6 holds no 7 distinct positions"),
          "a row longer than N: %s", pelab_last_error());
    return check_report("test_random_positions");
}
