/*
 * pipeline.c (bench_pipeline): the pipeline's bubble and activation memory
 * against the ramp formula and the replicated model (docs/pipeline.md,
 * docs/PERFORMANCE.md "Pipeline stages").
 *
 *   mpirun -np S build/bench_pipeline [--micro-batch B] [--steps N] [--ks K1,K2,..]
 *
 * The model: 13 dense features, 26 features of dim 16, bottom 512-512-16,
 * DCN with 3 cross layers of rank 64 over the 432-wide concat, top six
 * layers of 512 and the logit (14 blocks: the cross layers are blocks of their own).  For each schedule (fill-drain, 1f1b,
 * interleaved with 2 pieces per rank), with and without recomputation,
 * and each k (micro-batches per step; default S, 2S, 4S, 8S), the S ranks
 * run N timed steps (after 2 untimed) with cuts from the balance rule, and
 * rank 0 prints one JSON line: the median step time, each rank's busy
 * share (time inside its pieces' forward, backward and loss over the step
 * time) and peak activation bytes, the measured bubble (1 - the mean busy
 * share) beside the formula's (S - 1) / (k + S - 1) (interleaved:
 * ((S - 1) / v) / (k + (S - 1) / v)), and the bytes the replicated model
 * keeps (one micro-batch's), and the parameters each rank holds (its
 * pieces' only) beside the whole model's.  The replicated model's time is this program
 * under `mpirun -np 1`: its 1f1b rows run forward and backward micro-batch
 * by micro-batch, as the trainer does (timed beside the other ranks here,
 * it would share the machine with their waiting).  Every rank runs one
 * thread.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "comm/comm.h"
#include "dense/dense.h"
#include "ember-mpi.h"
#include "model/pipeline.h"

static dlrm_config bench_model(void)
{
    dlrm_config c;
    memset(&c, 0, sizeof c);
    c.num_dense = 13, c.num_sparse = 26, c.emb_dim = 16;
    c.num_bottom = 3, c.bottom[0] = 512, c.bottom[1] = 512, c.bottom[2] = 16;
    c.interaction = DENSE_INTERACT_DCN, c.num_cross = 3, c.cross_rank = 64;
    c.num_top = 6;
    for (int32_t l = 0; l < c.num_top; l++) /* layers of like cost, so that S pieces can balance */
        c.top[l] = 512;
    c.seed = 7;
    return c;
}

static void fill(float *x, int64_t n, uint64_t seed)
{
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = (float)((seed >> 40) & 0xffff) / 65536.0f - 0.5f;
    }
}

int main(int argc, char **argv)
{
    int32_t b = 256, steps = 5, ks[16], nks = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--micro-batch") && i + 1 < argc)
            b = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ks") && i + 1 < argc)
            for (char *t = strtok(argv[++i], ","); t && nks < 16; t = strtok(NULL, ","))
                ks[nks++] = atoi(t);
        else {
            fprintf(stderr, "usage: mpirun -np S bench_pipeline [--micro-batch B] [--steps N] [--ks K1,K2,..]\n");
            return 2;
        }
    }
    MPI_Init(&argc, &argv);
    ember_world *w = NULL;
    if (ember_world_from_mpi_comm(MPI_COMM_WORLD, &w) != EMBER_OK)
        MPI_Abort(MPI_COMM_WORLD, 1);
    const int32_t S = w->size, rank = w->rank;
    if (!nks)
        for (int32_t f = 1; f <= 8; f *= 2)
            ks[nks++] = S * f;
    const dlrm_config cfg = bench_model(); /* each model on one thread, one BLAS thread (dlrm_set_threads) */
    const int64_t pw = (int64_t)cfg.num_sparse * cfg.emb_dim;
    char err[256] = "";
    for (int32_t ki = 0; ki < nks; ki++) {
        const int32_t k = ks[ki];
        const int64_t rows = (int64_t)k * b;
        float *dense = malloc((size_t)(rows * cfg.num_dense) * sizeof(float));
        float *pooled = malloc((size_t)(rows * pw) * sizeof(float)), *dpool = malloc((size_t)(rows * pw) * sizeof(float));
        float *labels = malloc((size_t)rows * sizeof(float));
        fill(dense, rows * cfg.num_dense, 1), fill(pooled, rows * pw, 2), fill(labels, rows, 3);
        for (int64_t i = 0; i < rows; i++)
            labels[i] = labels[i] > 0 ? 1.0f : 0.0f;
        /* the replicated model keeps one micro-batch's activations at a time */
        int64_t rep_bytes = 0;
        dlrm *probe = NULL;
        if (dlrm_create(&cfg, &probe, err, sizeof err))
            MPI_Abort(MPI_COMM_WORLD, 1);
        for (int32_t blk = 0; blk < dlrm_num_blocks(probe); blk++)
            rep_bytes += dlrm_block_kept_floats(probe, blk) * b * (int64_t)sizeof(float);
        dlrm_destroy(probe);
        for (int sched = 0; sched < 3; sched++)
            for (int rec = 0; rec < 2; rec++) {
                pipe_config pc = pipe_config_default((pipe_schedule)sched);
                pc.recompute = rec;
                const int32_t P = S * pc.virtual_stages;
                dlrm *m = NULL;
                pipeline *p = NULL;
                if (P > dlrm_config_blocks(&cfg) || (sched == PIPE_INTERLEAVED && k % S))
                    continue;
                pc.num_cuts = P - 1;
                pipe_balance_config bc;
                memset(&bc, 0, sizeof bc);
                bc.micro_batch = b, bc.stages = S, bc.pipe = pc, bc.accumulate = k, bc.threads = bc.blas_threads = 1;
                uint8_t held[DENSE_MAX_BLOCKS];
                if (pipe_balance(&cfg, &bc, w, pc.cuts, NULL, err, sizeof err) ||
                    pipe_held(&pc, S, rank, dlrm_config_blocks(&cfg), held, err, sizeof err) ||
                    dlrm_create_part(&cfg, held, &m, err, sizeof err) || (dlrm_set_threads(m, 1, 1), 0) ||
                    pipe_create(&pc, m, w, &p, err, sizeof err)) {
                    fprintf(stderr, "rank %d: %s\n", rank, err);
                    MPI_Abort(MPI_COMM_WORLD, 1);
                }
                double t[16], loss;
                pipe_stats before = {0}, after;
                for (int32_t s = 0; s < steps + 2; s++) {
                    if (s == 2)
                        pipe_get_stats(p, &before);
                    MPI_Barrier(MPI_COMM_WORLD);
                    double t0 = ember_now();
                    dlrm_zero_grads(m);
                    if (pipe_step(p, k * b, b, dense, pooled, labels, 1.0f / (float)rows, &loss, dpool, err, sizeof err)) {
                        fprintf(stderr, "rank %d: %s\n", rank, err);
                        MPI_Abort(MPI_COMM_WORLD, 1);
                    }
                    MPI_Barrier(MPI_COMM_WORLD);
                    if (s >= 2 && s - 2 < 16)
                        t[s - 2] = ember_now() - t0;
                }
                pipe_get_stats(p, &after);
                double busy = (after.busy_s - before.busy_s) / (after.step_s - before.step_s);
                double busy_all[64] = {0};
                int64_t bytes_all[64] = {0}, bytes = after.peak_activation_bytes, params_all[64] = {0};
                int64_t params = dlrm_num_params(m);
                MPI_Gather(&busy, 1, MPI_DOUBLE, busy_all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
                MPI_Gather(&bytes, 1, MPI_INT64_T, bytes_all, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
                MPI_Gather(&params, 1, MPI_INT64_T, params_all, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
                if (rank == 0) {
                    const double v = pc.virtual_stages, ramp = (S - 1) / v;
                    double mean = 0;
                    for (int32_t r = 0; r < S; r++)
                        mean += busy_all[r] / S;
                    printf("{\"bench\":\"pipeline\",\"stages\":%d,\"schedule\":\"%s\",\"virtual\":%d,\"recompute\":%s,"
                           "\"k\":%d,\"micro_batch\":%d,\"step_ms_median\":%.3f,\"busy_share\":[",
                           S, pipe_schedule_name((pipe_schedule)sched), pc.virtual_stages, rec ? "true" : "false", k, b,
                           1e3 * bench_median(t, steps < 16 ? steps : 16));
                    for (int32_t r = 0; r < S; r++)
                        printf("%s%.3f", r ? "," : "", busy_all[r]);
                    printf("],\"bubble_measured\":%.3f,\"bubble_formula\":%.3f,\"peak_activation_bytes\":[", 1 - mean,
                           ramp / (k + ramp));
                    for (int32_t r = 0; r < S; r++)
                        printf("%s%lld", r ? "," : "", (long long)bytes_all[r]);
                    printf("],\"params_held\":[");
                    for (int32_t r = 0; r < S; r++)
                        printf("%s%lld", r ? "," : "", (long long)params_all[r]);
                    printf("],\"params_whole\":%lld", (long long)dlrm_full_params(m));
                    printf(",\"replicated_activation_bytes\":%lld,\"cuts\":[", (long long)rep_bytes);
                    for (int32_t j = 0; j < P - 1; j++)
                        printf("%s%d", j ? "," : "", pc.cuts[j]);
                    printf("]}\n");
                    fflush(stdout);
                }
                pipe_destroy(p);
                dlrm_destroy(m);
            }
        free(dense), free(pooled), free(dpool), free(labels);
    }
    ember_world_destroy(w);
    MPI_Finalize();
    return 0;
}
