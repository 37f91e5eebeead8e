/* Fuzz target: the JSON parser and the config.json reader. Any bytes go to pelab_json_parse (the
 * tree is walked whole) and to pelab_config_parse; a config that reads goes through everything
 * pelab checks before it builds a model: the option tables, the training options, the task. */
#include <math.h>
#include "fuzz.h"
#include "pelab/json.h"
#include "pelab/model.h"
#include "pelab/task.h"
#include "pelab/train.h"

#define NAME "fuzz/config.json"

/* Visits every node (ASan sees every string and child pointer). */
static size_t walk(const struct pelab_json *j, int depth) {
    if (depth > 64) abort(); /* the parser promises at most 64 levels */
    size_t n = 1;
    if (j->type == PELAB_JSON_STRING) n += strlen(j->string);
    if (j->type == PELAB_JSON_NUMBER && (j->raw_len == 0 || !isfinite(j->number))) abort();
    for (int i = 0; i < j->count; i++) {
        if (j->type == PELAB_JSON_OBJECT) n += strlen(j->keys[i]);
        n += walk(j->items[i], depth + 1);
    }
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct pelab_json *j;
    int rc = pelab_json_parse((const char *)data, size, &j);
    if (rc) {
        fuzz_check_refusal(rc, "JSON: at byte ");
    } else {
        walk(j, 1);
        pelab_json_free(j);
    }

    static struct pelab_opts o;
    rc = pelab_config_parse(NAME, (const char *)data, size, &o);
    if (rc) {
        fuzz_check_refusal(rc, NAME);
        return 0;
    }
    const char *task = pelab_opt_str(&o, pelab_train_options, "task");
    const char *pe = pelab_opt_str(&o, pelab_model_options, "pe");
    static struct pelab_train_config c;
    rc = pelab_train_check_opts(&o, task, &pe, 1, NULL);
    if (!rc) rc = pelab_train_config_read(&o, &c);
    if (rc) {
        fuzz_check_refusal(rc, NULL);
        return 0;
    }
    struct pelab_task t;
    rc = pelab_task_init(&t, task, &o);
    if (rc)
        fuzz_check_refusal(rc, NULL);
    else
        pelab_task_free(&t);
    return 0;
}
