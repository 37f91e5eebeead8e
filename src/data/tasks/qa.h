/* src/data/tasks/qa.h — what the qa task tells its evaluation (src/eval/qa_sweep.c). */
#ifndef PELAB_DATA_TASKS_QA_H
#define PELAB_DATA_TASKS_QA_H

#include "pelab/task.h"

/* The characters an answer of t's variant is written with: digits (passkey, kv), digits, commas
 * and spaces (multi). A generated answer is cut where it leaves them. NULL when t is not qa. */
const char *pelab_qa_answer_chars(const struct pelab_task *t);
/* "passkey", "kv" or "multi"; NULL when t is not qa. */
const char *pelab_qa_variant(const struct pelab_task *t);

/* Appends the text of ids[0..n-1] (the tokenizer's decode; not the task op `decode`, which
 * marks tasks of documents). t must be qa. */
int pelab_qa_decode(const struct pelab_task *t, const int32_t *ids, size_t n,
                    struct pelab_bytes *out);

#endif
