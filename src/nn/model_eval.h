/* Private to the library and its tests: the evaluation-only forward's chunk length. */
#ifndef PELAB_NN_MODEL_EVAL_H
#define PELAB_NN_MODEL_EVAL_H

/* Positions per chunk of the position-wise part (MLP, output layer, loss) of
 * pelab_model_forward_eval; 0 restores the default (about 4M reals of hidden or logits). Tests set
 * a small one so that tiny models run over several chunks. */
void pelab_model_eval_set_rows(long rows);

#endif
