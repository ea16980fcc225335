/*
 * cmd_train.c: `ember train`, DLRM-style CTR training end to end
 * (docs/training.md): the options into the trainer's overrides, then the
 * library's trainer (include/ember-train.h) opened and run, its events
 * shown as text or JSON lines (train_report.c).
 *
 * Under mpirun every rank runs the trainer (it is collective, and agrees
 * on failures, so every rank returns the same status together); rank 0
 * prints what happens and the message of a failure, which names the
 * failing rank when it was one rank's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "ember-train.h"
#include "train_tool.h"

static void train_usage(FILE *f)
{
    fprintf(f,
            "usage: ember train [options]\n"
            "  trains a DLRM-style CTR model (docs/training.md); without --config the built-in\n"
            "  synthetic task, whose labels come from a hidden teacher\n\n"
            "  --config FILE        settings: tables, data, model, train (docs/config.md)\n"
            "  --train-file FILE    train on FILE instead of the built-in task or the config's\n"
            "                       data.train_file: an ember binary file, else text by the config's\n"
            "                       data.schema (docs/data.md), else Criteo TSV, by its first bytes\n"
            "  --eval-file FILE     evaluate on FILE (all of it unless --eval-samples says fewer)\n"
            "  --steps N            optimizer steps (default 3000)\n"
            "  --seed S             seed of the tables, the dense model and the synthetic data\n"
            "  --threads T          threads per rank (default 1, or the config's threads)\n"
            "  --reader R           with no core to spare for the reader thread (threads x ranks\n"
            "                       on the machine >= cores): auto (default: trials pick the\n"
            "                       faster), team (the step's threads read the batches) or\n"
            "                       thread (a reader thread and a step thread fewer); same results\n"
            "  --blas-threads T     OpenBLAS threads per rank for the dense GEMMs (default 1:\n"
            "                       results then do not depend on --threads)\n"
            "  --micro-batch B      samples per micro-batch per rank (default 2048)\n"
            "  --accumulate K       micro-batches per step (default 1)\n"
            "  --optimizer-shards G the dense optimizer's state sharded over groups of G ranks\n"
            "                       (G divides the world, or with pipeline stages each stage's\n"
            "                       ranks; same results; default 0: every rank\n"
            "                       holds all of it)\n"
            "  --schedule S         blocking (default), overlap (the next batch's ids travel\n"
            "                       while the dense model runs; same results) or stale (the next\n"
            "                       batch is looked up before this step's sparse update: one\n"
            "                       step stale; docs/distributed.md)\n"
            "  --precision P        every table's rows train in fp32, fp16 or bf16, its own setting\n"
            "                       too (default: each table's, else model.emb_precision, else fp32;\n"
            "                       docs/precision.md)\n"
            "  --rounding R         how half rows and state round each update: stochastic (default)\n"
            "                       or nearest\n"
            "  --state-precision P  the optimizer state of every table whose state is per element\n"
            "                       (Adagrad, Adam, ...): fp32, fp16 or bf16 (default: each table's,\n"
            "                       else model.emb_state_precision, else fp32; the row-wise kinds'\n"
            "                       state stays fp32)\n"
            "  --lr-warmup N        learning rates rise linearly over the first N steps (default 0)\n"
            "  --lr-decay D         then none (default), linear or cosine down to\n"
            "                       train.lr_schedule.final (default 0) at the last step\n"
            "  --eval-every N       evaluate every N steps (0: only at the end; default 500)\n"
            "  --eval-samples N     held-out samples per evaluation (default: 65536 of the built-in\n"
            "                       task; all of an eval file)\n"
            "  --metrics FILE       JSON lines (default ember-train-metrics.jsonl; none: off)\n"
            "  --plot FILE          PNG of loss and AUC over steps (default ember-train.png; none: off)\n"
            "  --json               stdout: JSON lines only (no progress)\n"
            "  --checkpoint-dir DIR save checkpoints under DIR (ember inspect reads them)\n"
            "  --checkpoint-every N every N steps (0: only at the end; default 0), and at the end\n"
            "  --keep K             keep the newest K checkpoints (default 0: all)\n"
            "  --resume             continue from the newest checkpoint under --checkpoint-dir\n"
            "                       (none: start from scratch) up to --steps in all\n\n"
            "The last line of stdout is one JSON object: {\"event\":\"summary\",\"auc\":...,\n"
            "\"teacher_auc\":...,\"logloss\":...,\"samples_per_s\":...,\"steps\":...,\"peak_rss_mb\":...}.\n"
            "Under mpirun -np R each rank reads its own share; the global batch is R x K x B.\n");
}

/* The trainer's events to the report, once it is open (rank 0's). */
static void on_event(void *report_slot, const char *json_object)
{
    train_report_event(*(train_report **)report_slot, json_object);
}

/* 0, or the exit status (2: usage; 0 with *done for --help). */
static int parse_args(const tool_ctx *ctx, int argc, char **argv, ember_train_overrides *o, const char **config,
                      int *json, int *done)
{
    ember_train_overrides_init(o);
    *config = NULL;
    *json = *done = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *eq = strchr(arg, '=');
        char name[64];
        size_t nlen = eq ? (size_t)(eq - arg) : strlen(arg);
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            train_usage(stdout);
            *done = 1;
            return 0;
        }
        if (!strcmp(arg, "--json") || !strcmp(arg, "--resume")) { /* flags */
            *(arg[2] == 'j' ? json : &o->resume) = 1;
            continue;
        }
        if (strncmp(arg, "--", 2) || nlen >= sizeof name) {
            fprintf(ctx->err, "ember train: unexpected argument '%s' (ember train --help)\n", arg);
            return 2;
        }
        memcpy(name, arg, nlen);
        name[nlen] = '\0';
        const char *val = eq ? eq + 1 : i + 1 < argc ? argv[i + 1] : NULL;
        int rc = 1; /* 1: no such option */
        char reason[256] = "";
        if (!strcmp(name, "--config")) {
            rc = !val || !*val ? EMBER_EINVAL : EMBER_OK;
            *config = val;
        } else if (strcmp(name, "--resume") && !strchr(name, '_')) { /* a flag takes no value */
            rc = ember_train_overrides_set_reason(o, name + 2, val, reason, sizeof reason);
        }
        if (rc == 1) {
            fprintf(ctx->err, "ember train: unknown option '%s' (ember train --help)\n", name);
            return 2;
        }
        if (rc != EMBER_OK) {
            fprintf(ctx->err, "ember train: bad value for %s: '%s'%s%s%s\n", name, val ? val : "(missing)",
                    reason[0] ? " (" : "", reason, reason[0] ? ")" : "");
            return 2;
        }
        if (!eq)
            i++;
    }
    return 0;
}

int cmd_train(const tool_ctx *ctx, int argc, char **argv)
{
    ember_train_overrides o;
    const char *config;
    int json, done = 0, st = parse_args(ctx, argc, argv, &o, &config, &json, &done);
    if (st || done)
        return st;
    train_report *rep = NULL;
    ember_trainer *t = NULL;
    /* the report is opened after the trainer (it needs the settings'
     * paths), before the run: the events reach it through this slot */
    int rc = ember_trainer_open(config, &o, ctx->world, on_event, &rep, &t), opened = rc == EMBER_OK;
    ember_train_info info;
    if (opened && (rc = ember_trainer_info(t, &info)) == EMBER_OK) {
        train_report_opts ro = {json, info.metrics, info.plot, info.checkpoint_dir, info.resumed};
        if (train_report_open(ctx, &ro, &rep)) {
            ember_trainer_close(t);
            return 1;
        }
        rc = ember_trainer_run(t);
    }
    if (rc == EMBER_OK) {
        int64_t failed = train_report_finish(rep, ember_trainer_summary(t)); /* rank 0's files */
        ember_world_reduce_i64(ctx->world, &failed, 1, EMBER_WORLD_MAX);     /* every rank exits alike */
        st = (int)failed;
    } else {
        fflush(stdout);
        fprintf(ctx->err, "ember train: %s\n", ember_errmsg(t));
        fflush(ctx->err);
        st = !opened && rc == EMBER_EINVAL ? 2 : 1; /* the settings contradict each other */
    }
    fflush(stdout);
    train_report_close(rep);
    ember_trainer_close(t);
    return st;
}
