/* main.c — `trm <command> [options] [key=value ...]`: global options, help and dispatch. */
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "commands.h"
#include "train/train.h"
#include "util/util.h"

typedef struct {
    const char *name;
    trm_command_fn fn;
    const char *summary;
    const char *help;
} command_entry;

static int cmd_version(int argc, char **argv, const trm_globals *g) {
    (void)argc; (void)argv; (void)g;
    printf("trm %s\n", TRM_VERSION);
    return 0;
}

static const command_entry commands[] = {
    {"pretrain", cmd_pretrain, "train a TRM (the reference's pretrain.py)",
     "usage: trm pretrain [--nproc-per-node N [--nnodes M --node-rank R\n"
     "                    --master-addr HOST --master-port P]]\n"
     "                    [cfg=NAME] [key=value ...]\n"
     "  Trains a Tiny Recursive Model on the dataset(s) in data_paths. The config is\n"
     "  configs/cfg_pretrain.yaml (or cfg=NAME) with command-line overrides applied.\n"
     "  Distributed data-parallel: --nproc-per-node N starts N workers on this host;\n"
     "  over M hosts, the same command on each with its --node-rank R (0 on the host\n"
     "  of rank 0, HOST its address; or torchrun's --rdzv-endpoint HOST:P). Also\n"
     "  `mpirun -np N trm pretrain ...` and torchrun's environment (RANK, WORLD_SIZE,\n"
     "  LOCAL_RANK, MASTER_ADDR, MASTER_PORT). global_batch_size is split over all\n"
     "  the ranks.\n"
     "  The run directory (checkpoint_path) gets config.yaml, metrics.jsonl,\n"
     "  TensorBoard event files, checkpoints and report.html (open it in a browser;\n"
     "  refreshed at every evaluation). It belongs to one run: a second process\n"
     "  into it is refused, as is a new run into one that holds a run, unless\n"
     "  resume= or overwrite=true.\n"
     "  On a terminal one status line shows the progress (redrawn every\n"
     "  TRM_PROGRESS_INTERVAL=1 seconds).\n"
     "  trm's own keys (besides the reference's cfg_pretrain.yaml):\n"
     "    device=auto|cpu|cuda[:N]|mps  the backend (auto: cuda > mps > cpu)\n"
     "    compile=auto|true|false       plan the step once: fusions, one arena, a\n"
     "                                  CUDA graph (auto: where the backend can)\n"
     "    recompute=none|gate_up|all    trade compute for activation memory\n"
     "    log_interval=N                train metrics to metrics.jsonl every N steps\n"
     "    logger=tensorboard|none       also write them as TensorBoard event files\n"
     "                                  (default tensorboard; tensorboard --logdir\n"
     "                                  checkpoints, wandb sync --sync-tensorboard)\n"
     "    resume=auto|FILE              continue a run exactly (auto: the latest\n"
     "                                  checkpoint in checkpoint_path)\n"
     "    stop_after_steps=N            stop with a checkpoint after step N;\n"
     "                                  continue with resume=auto\n"
     "    overwrite=true                move a run already in checkpoint_path to\n"
     "                                  DIR.prev-N instead of refusing to start\n"
     "    load_checkpoint=FILE          start a new run from saved weights\n"
     "    eval_save_outputs=true        each evaluation's predictions to\n"
     "                                  step_N_preds.npy; the reference's list\n"
     "                                  ([inputs,labels,preds]): step_N_all_preds.0\n"
     "  (+project_name, +run_name, +checkpoint_path, +load_checkpoint and\n"
     "  +eval_save_outputs work with or without the +.)\n"
     "  examples:\n"
     "    trm pretrain cfg=sudoku data_paths=[data/sudoku-extreme-1k-aug-1000] \\\n"
     "        +run_name=x\n"
     "    trm pretrain arch.L_cycles=4 global_batch_size=64 resume=auto\n"
     "    trm pretrain --nproc-per-node 2 cfg=sudoku device=cuda +run_name=ddp\n"
     "    trm pretrain --nnodes 2 --node-rank 1 --nproc-per-node 4 \\\n"
     "        --master-addr node0 --master-port 29500 cfg=arc +run_name=big\n"},
    {"generate", cmd_generate, "run a trained checkpoint on data or a puzzle",
     "usage: trm generate --checkpoint FILE [--data DIR [--split test] [--json]\n"
     "                    [--output F]] [--input TEXT] [cfg=NAME] [--seq-len N]\n"
     "                    [device=...] [overrides]\n"
     "  Runs the model in evaluation mode (halt_max_steps ACT steps). FILE is a trm\n"
     "  checkpoint or the reference's weights (torch.save or safetensors); the config\n"
     "  is the one stored in FILE, else all_config.yaml beside it, else cfg=NAME with\n"
     "  the overrides (it says which).\n"
     "  --input takes Sudoku digits ('.' or '0' blank; spaces, '|', '-', '+' and\n"
     "  newlines are layout), maze text ('# SGo') or comma-separated token ids;\n"
     "  repeat it for several puzzles. --json prints one JSON object: the data's\n"
     "  metrics and/or \"puzzles\": [{input, prediction, input_tokens,\n"
     "  prediction_tokens, ...}].\n"},
    {"convert", cmd_convert, "PyTorch interop: trm checkpoint <-> the reference's state_dict",
     "usage: trm convert CHECKPOINT.safetensors OUT [--compiled | --prefix P]\n"
     "                   [--force]\n"
     "       trm convert REFERENCE_FILE OUT.safetensors [cfg=NAME] [overrides]\n"
     "                   [--data DIR] [--seq-len N] [--force]\n"
     "  A trm checkpoint becomes exactly the reference's state_dict: keys\n"
     "  model.inner.* (with --compiled _orig_mod.model.inner.*, what the reference's\n"
     "  pretrain.py load_checkpoint= expects), fp32 weights (the EMA ones when the\n"
     "  run used EMA), H_init/L_init in forward_dtype; OUT.safetensors for\n"
     "  safetensors' load_file, any other name for torch.load.\n"
     "  The reference's files (torch.save, e.g. its step_N, or safetensors; any of\n"
     "  the prefixes _orig_mod., model., module.) become a trm checkpoint for\n"
     "  trm generate and load_checkpoint=. The config comes from all_config.yaml\n"
     "  beside the file (the reference's run config) over trm's defaults, else from\n"
     "  cfg=NAME and the overrides; seq_len of an attention model comes from\n"
     "  --data DIR, the config's data_paths or --seq-len.\n"
     "  An existing OUT is kept unless --force is given.\n"},
    {"data", cmd_data, "build datasets (sudoku, maze, arc) and generate puzzles",
     "usage: trm data <builder> [options]\n"
     "  sudoku4 --out DIR [--train N] [--test N] [--min-clues A] [--max-clues B]\n"
     "          [--seed S] [--force]\n"
     "      a small 4x4 Sudoku task (unique solutions, test puzzles unseen in\n"
     "      training)\n"
     "  sudoku (--csv-dir DIR | --download [--repo ID]) --out OUT\n"
     "         [--subsample-size N] [--num-aug K] [--min-difficulty R] [--seed S]\n"
     "      Sudoku-Extreme layout CSVs (train.csv, test.csv; --download: from the\n"
     "      Hugging Face Hub) -> the reference's dataset layout\n"
     "  sudoku-gen --count N --out FILE.csv [--seed S] [--min-clues A --max-clues B]\n"
     "             [--min-rating R]\n"
     "      puzzles with exactly one solution (minimal or near-minimal by default)\n"
     "  maze (--csv-dir DIR | --download [--repo ID]) --out OUT\n"
     "       [--subsample-size N] [--aug] [--seed S]\n"
     "      Maze-Hard layout CSVs (or from the Hub) -> dataset (8 dihedral copies\n"
     "      with --aug)\n"
     "  maze-gen --count N --out FILE.csv [--size 30] [--min-path-len L] [--seed S]\n"
     "      mazes with a unique shortest S->G path of at least L moves\n"
     "  arc --input-file-prefix P --subsets A B ... --test-set-name NAME\n"
     "      [--test-set-name2 NAME2] [--num-aug K] [--seed S] --out OUT\n"
     "      Kaggle ARC JSON -> dataset\n"
     "  Builders write OUT under a temporary name and rename it when complete; an\n"
     "  existing OUT is kept unless --force is given. trm data BUILDER --help tells\n"
     "  more about each.\n"},
    {"config", cmd_config, "show the composed configuration",
     "usage: trm config show [cfg=NAME] [overrides ...]\n"
     "       trm config list\n"
     "  Prints the fully resolved config as YAML. Override forms:\n"
     "    a.b=v        set an existing key (error if it does not exist)\n"
     "    +a.b=v       add a new key (error if it exists)\n"
     "    ++a.b=v      add or override\n"
     "    ~a.b         delete a key\n"
     "    arch=NAME    choose configs/arch/NAME.yaml for the arch group\n"
     "    k=null  k=[a,b]  k=\"quoted string\"  k=1e-4  k=true\n"
     "  ${key} and ${.key} interpolations are resolved after all overrides.\n"},
    {"inspect", cmd_inspect, "list tensors and metadata of a safetensors file",
     "usage: trm inspect FILE [FILE ...]\n"
     "  Lists every tensor (name, dtype, shape, bytes) and the metadata, verifies\n"
     "  CRC32 checksums when present; exits non-zero on a malformed file.\n"
     "       trm inspect --diff A B [--tol T]\n"
     "  Compares two files tensor by tensor: max |a-b| and that relative to max |a|;\n"
     "  with --tol, exits 1 when a relative difference exceeds T (or the tensors\n"
     "  differ in name/shape).\n"},
    {"devices", cmd_devices, "list backends, devices and capabilities",
     "usage: trm devices\n"},
    {"bench", cmd_bench, "time training steps on synthetic data",
     "usage: trm bench [cfg=NAME] [overrides] [--steps N] [--warmup W] [--seq-len S]\n"
     "                 [--vocab V] [--num-ids N] [--json]\n"
     "  Times N training steps (after W warm-up steps) of the configured model on\n"
     "  random tokens: median ms/step, examples/s, model TFLOP/s and peak RSS.\n"},
    {"plot", cmd_plot, "plot learning curves of one or more runs",
     "usage: trm plot RUN_DIR [RUN_DIR ...] [-o FILE.svg|FILE.png] [--title T]\n"
     "                [--width PX]\n"
     "  Reads each run's metrics.jsonl (a run still training plots what it has) and\n"
     "  draws lm_loss (log scale when it spans a factor of 5), accuracy, exact\n"
     "  accuracy, q_halt accuracy, mean ACT steps and the learning rate against\n"
     "  step, train solid and eval dashed, one colour per run, and ARC pass@K when a\n"
     "  run has it. The format follows the extension of -o (default curves.svg);\n"
     "  PNG is written without any image library.\n"
     "  Each run directory also holds report.html, refreshed at every evaluation.\n"
     "  examples:\n"
     "    trm plot checkpoints/tiny-demo\n"
     "    trm plot runs/a runs/b -o compare.png\n"},
    {"version", cmd_version, "print the version", "usage: trm version\n"},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
    fprintf(f,
            "trm %s — Tiny Recursive Model trainer\n\n"
            "usage: trm [--config-dir DIR] <command> [options] [key=value ...]\n\n"
            "commands:\n",
            TRM_VERSION);
    for (size_t i = 0; i < NCOMMANDS; i++) fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f,
            "\n  help <command>   detailed help for a command\n\n"
            "global options:\n"
            "  --config-dir DIR  look for configs in DIR first (repeatable; also\n"
            "                    TRM_CONFIG_PATH, colon-separated); the configs built\n"
            "                    into the binary come last\n");
}

static const command_entry *find_command(const char *name) {
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0) return &commands[i];
    return NULL;
}

/* "trm: unknown command 'pretrian'; did you mean 'pretrain'?" */
static void unknown_command(const char *name) {
    const char *names[NCOMMANDS + 1];
    for (size_t i = 0; i < NCOMMANDS; i++) names[i] = commands[i].name;
    names[NCOMMANDS] = "help";
    const char *near = trm_nearest(name, names, NCOMMANDS + 1);
    if (near)
        fprintf(stderr, "trm: unknown command '%s'; did you mean '%s'? (see trm --help)\n", name, near);
    else
        fprintf(stderr, "trm: unknown command '%s' (see trm --help)\n", name);
}

/* `trm help CMD [SUB]`; `trm data BUILDER --help` comes here too. */
static int print_help(const command_entry *c, const char *sub) {
    if (sub && c->fn == cmd_data) return trm_data_help(sub, stdout);
    fputs(c->help, stdout);
    return 0;
}

int main(int argc, char **argv) {
    trm_cpu_env(argv);
    trm_globals g = {.search = {.dirs = NULL, .ndirs = 0, .use_embedded = 1, .float_keys = trm_run_config_float_keys},
                     .argv0 = argv[0]};
    const char **dirs = xcalloc((size_t)argc + 64, sizeof *dirs);
    int nd = 0, i = 1;
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--config-dir") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "trm: --config-dir needs a directory\n");
                return 2;
            }
            dirs[nd++] = argv[++i];
        } else if (strncmp(argv[i], "--config-dir=", 13) == 0) {
            dirs[nd++] = argv[i] + 13;
        } else {
            break;
        }
    }
    char *envpath = getenv("TRM_CONFIG_PATH") ? xstrdup(getenv("TRM_CONFIG_PATH")) : NULL;
    for (char *tok = envpath ? strtok(envpath, ":") : NULL; tok && nd < argc + 63; tok = strtok(NULL, ":"))
        if (*tok) dirs[nd++] = tok;
    g.search.dirs = dirs;
    g.search.ndirs = nd;

    int rc;
    if (i >= argc) {
        usage(stderr);
        rc = 2;
    } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
        usage(stdout);
        rc = 0;
    } else if (!strcmp(argv[i], "--version")) {
        rc = cmd_version(0, NULL, &g);
    } else if (!strcmp(argv[i], "help")) {
        const command_entry *c = i + 1 < argc ? find_command(argv[i + 1]) : NULL;
        if (i + 1 >= argc) {
            usage(stdout);
            rc = 0;
        } else if (!c) {
            unknown_command(argv[i + 1]);
            rc = 2;
        } else {
            rc = print_help(c, i + 2 < argc ? argv[i + 2] : NULL);
        }
    } else {
        const command_entry *c = find_command(argv[i]);
        if (!c) {
            unknown_command(argv[i]);
            rc = 2;
        } else if (trm_wants_help(argc - i - 1, argv + i + 1)) {
            /* `trm data sudoku --help`: the builder's own usage */
            const char *sub = c->fn == cmd_data && i + 1 < argc && argv[i + 1][0] != '-' ? argv[i + 1] : NULL;
            rc = print_help(c, sub);
        } else {
            rc = c->fn(argc - i - 1, argv + i + 1, &g);
        }
    }
    free(envpath);
    free(dirs);
    return rc;
}
