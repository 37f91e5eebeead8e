/* jsb — the JSB chorales (Boulanger-Lewandowski et al., 2012), 16th-note grid, voices
 * separated, from the copy the repository keeps (datasets/jsb-chorales, with its SOURCE.md; copied
 * to sources/jsb/Jsb16thSeparated.json by the fetch script, from --jsb-dir when given).
 * The file's own split is kept: train 229, valid 76 (val), test 77 chorales. A chorale's text is
 * one line per step with its four MIDI pitches (soprano, alto, tenor, bass; -1 silence), the form
 * the jsb tokenizer reads; ids "train-000", "val-000", "test-000", ….
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data/datasets/datasets.h"
#include "pelab/json.h"
#include "pelab/status.h"

#define FILE_NAME "Jsb16thSeparated.json"

/* One chorale (a list of [p, p, p, p] steps) as text. */
static int chorale_text(const struct pelab_json *c, char **out, size_t *len, const char *where) {
    if (c->type != PELAB_JSON_ARRAY || c->count == 0)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: not a list of time steps", where);
    char *text = malloc((size_t)c->count * 4 * 5 + 1); /* "-1 " .. "108 ": at most 4 bytes + sep */
    if (!text) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    size_t o = 0;
    for (int t = 0; t < c->count; t++) {
        const struct pelab_json *step = c->items[t];
        if (step->type != PELAB_JSON_ARRAY || step->count != 4) {
            free(text);
            return pelab_fail(PELAB_ERR_RUNTIME, "%s: step %d does not hold 4 voices", where, t);
        }
        for (int v = 0; v < 4; v++) {
            const struct pelab_json *p = step->items[v];
            double x = p->type == PELAB_JSON_NUMBER ? p->number : 0;
            if (!(x == -1 || (x >= 21 && x <= 108 && x == (int)x))) {
                free(text);
                return pelab_fail(PELAB_ERR_RUNTIME, "%s: step %d voice %d is not a MIDI pitch "
                                  "21..108 or -1", where, t, v);
            }
            o += (size_t)sprintf(text + o, "%d%c", (int)x, v == 3 ? '\n' : ' ');
        }
    }
    *out = text;
    *len = o;
    return PELAB_OK;
}

static int jsb_build(const char *src, struct pelab_docs *docs) {
    static const struct { const char *key, *id; int split; } splits[] = {
        {"train", "train", PELAB_DOC_TRAIN}, {"valid", "val", PELAB_DOC_VAL}, {"test", "test", PELAB_DOC_TEST}};
    char *raw;
    size_t len;
    int rc = pelab_read_source(src, FILE_NAME, &raw, &len);
    if (rc) return rc;
    struct pelab_json *j;
    rc = pelab_json_parse(raw, len, &j);
    free(raw);
    if (rc) return pelab_fail_context(PELAB_ERR_RUNTIME, "%s/%s", src, FILE_NAME);
    for (int s = 0; s < 3 && !rc; s++) {
        const struct pelab_json *list = pelab_json_get(j, splits[s].key);
        if (!list || list->type != PELAB_JSON_ARRAY) {
            rc = pelab_fail(PELAB_ERR_RUNTIME, "%s/%s: no list of chorales under \"%s\"", src,
                            FILE_NAME, splits[s].key);
            break;
        }
        for (int i = 0; i < list->count && !rc; i++) {
            char id[32], where[4200], *text = NULL;
            size_t tl = 0;
            snprintf(id, sizeof id, "%s-%03d", splits[s].id, i);
            snprintf(where, sizeof where, "%s/%s: %s chorale %d", src, FILE_NAME, splits[s].key, i);
            rc = chorale_text(list->items[i], &text, &tl, where);
            if (!rc) rc = pelab_docs_add(docs, id, text, tl, splits[s].split);
        }
    }
    pelab_json_free(j);
    return rc;
}

static const char *const music_tokenizers[] = {"jsb", NULL};

const struct pelab_dataset_ops pelab_dataset_jsb = {
    .name = "jsb",
    .kind = "music",
    .summary = "JSB chorales, 16th-note grid, 4 voices; the published 229/76/77 split",
    .source = "the repository's datasets/jsb-chorales/Jsb16thSeparated.json (--jsb-dir)",
    .license = "public domain music (J. S. Bach); cite Boulanger-Lewandowski et al. 2012",
    .tokenizers = music_tokenizers,
    .long_docs = 0,
    .text_crc = 0x1554220f, /* measured on the pinned package (Debian 12) */
    .build = jsb_build,
};
