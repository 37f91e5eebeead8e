/* The exact match of a generated answer (pelab_qa_match): the generation cut where it leaves the
 * answer's characters, both trimmed and compared lower-cased; the answer's final "." does not
 * count, a longer or shorter number does, and so does any other value order in multi. */
#include <string.h>
#include "lib/check.h"
#include "pelab/qa_sweep.h"

static int match(const char *g, const char *answer, const char *chars) {
    return pelab_qa_match(g, strlen(g), answer, strlen(answer), chars);
}

int main(void) {
    const char *digits = "0123456789", *multi = "0123456789, ";
    CHECK(match("12345.", "12345.", digits), "the answer itself");
    CHECK(match("12345. Remember it", "12345.", digits), "the answer, then other text");
    CHECK(match(" 12345 is the pass key", "12345.", digits), "white space before, words after");
    CHECK(match("12345", "12345.", digits), "no end: the cut text is the answer");
    CHECK(!match("123456.", "12345.", digits), "a digit too many");
    CHECK(!match("1234.", "12345.", digits), "a digit too few");
    CHECK(!match("12354.", "12345.", digits), "two digits swapped");
    CHECK(!match("", "12345.", digits), "nothing generated");
    CHECK(!match("The pass key is 12345.", "12345.", digits), "words before the number");
    CHECK(match("\n12345\t.", "12345.", digits), "trimmed of white space at both ends");
    CHECK(match("12, 34, 56. The", "12, 34, 56.", multi), "multi: every value, in order");
    CHECK(!match("12, 34, 56, the", "12, 34, 56.", multi), "multi: a separator after the last value");
    CHECK(!match("12, 34.", "12, 34, 56.", multi), "multi: a value missing");
    CHECK(!match("12, 56, 34.", "12, 34, 56.", multi), "multi: another order");
    CHECK(!match("12, 34, 56, 78.", "12, 34, 56.", multi), "multi: a value too many");
    CHECK(match("ABC.", "abc.", "abcABC"), "lower-cased");
    CHECK(!match("ABD.", "abc.", "abcdABCD"), "lower-cased, still different");
    return check_report("qa_match");
}
