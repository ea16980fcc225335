// peer_absl_map.cc: a PEER, not part of ember: the workload of
// bench/keymap.c on absl::flat_hash_map<uint64_t, uint32_t> (Debian's
// libabsl-dev), the map C++ users reach for.  Built and run by
// bench/keymap.sh.  absl picks its own table size (it grows at 7/8 load),
// so it holds the same keys at its own load factor, printed as
// "absl_load".  It is not thread-safe for inserts: with T threads each
// thread owns one map (keys split by a hash bit), finds run concurrently.
// Two runs: the default allocator ("absl": malloc, which gets no huge
// pages where transparent huge pages are "madvise"), and an allocator that
// maps arrays of 2 MiB or more with MADV_HUGEPAGE as ember's map does
// ("absl_thp"), so the comparison of the maps themselves is at equal pages.
#include <absl/base/config.h>
#include <absl/container/flat_hash_map.h>
#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

static const int64_t FIND_KEYS = 1 << 22, FIND_BATCH = 4096, UPSERT_KEYS = 1 << 18;

static double now()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t mix(uint64_t k)
{
    k = (k ^ (k >> 30)) * 0xbf58476d1ce4e5b9ULL;
    k = (k ^ (k >> 27)) * 0x94d049bb133111ebULL;
    return k ^ (k >> 31);
}

static double median(std::vector<double> x)
{
    std::sort(x.begin(), x.end());
    size_t n = x.size();
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

// Arrays of 2 MiB or more from mmap with MADV_HUGEPAGE, others from new.
template <class T> struct thp_alloc {
    using value_type = T;
    thp_alloc() = default;
    template <class U> thp_alloc(const thp_alloc<U> &) {}
    static bool huge(size_t bytes) { return bytes >= (size_t)2 << 20; }
    T *allocate(size_t n)
    {
        size_t bytes = n * sizeof(T);
        if (!huge(bytes))
            return static_cast<T *>(::operator new(bytes));
        void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            throw std::bad_alloc();
        madvise(p, bytes, MADV_HUGEPAGE);
        return static_cast<T *>(p);
    }
    void deallocate(T *p, size_t n)
    {
        size_t bytes = n * sizeof(T);
        if (huge(bytes))
            munmap(p, bytes);
        else
            ::operator delete(p);
    }
    template <class U> bool operator==(const thp_alloc<U> &) const { return true; }
    template <class U> bool operator!=(const thp_alloc<U> &) const { return false; }
};

typedef absl::flat_hash_map<uint64_t, uint32_t> map_t;
typedef absl::flat_hash_map<uint64_t, uint32_t, absl::container_internal::hash_default_hash<uint64_t>,
                            absl::container_internal::hash_default_eq<uint64_t>,
                            thp_alloc<std::pair<const uint64_t, uint32_t>>>
    map_thp_t;

static void emit(const char *impl, const char *op, double load, double absl_load, int threads, int64_t n, double ns, int reps)
{
    printf("{\"bench\":\"keymap\",\"impl\":\"%s\",\"op\":\"%s\",\"load\":%.2f,\"absl_load\":%.3f,\"threads\":%d,"
           "\"keys\":%lld,\"ns_per_key\":%.2f,\"mkeys_per_s\":%.1f,\"reps\":%d,\"absl_lts\":%d,\"compiler\":\"g++ %d.%d\"}\n",
           impl, op, load, absl_load, threads, (long long)n, ns, 1e3 / ns, reps, ABSL_LTS_RELEASE_VERSION, __GNUC__,
           __GNUC_MINOR__);
    fflush(stdout);
}

// The find and upsert workloads on one map type, 1..max_threads threads.
template <class Map>
static void run(const char *impl, double load, int64_t n, const std::vector<uint64_t> &keys,
                const std::vector<uint64_t> &queries, const std::vector<uint64_t> &up, std::vector<uint32_t> &out,
                int reps, int max_threads)
{
    for (int threads = 1; threads <= max_threads; threads++) {
        int shards = threads > 1 ? 2 : 1;
        std::vector<Map> m(shards);
        for (int64_t i = 0; i < n; i++)
            m[shards > 1 ? mix(keys[i]) >> 63 : 0].emplace(keys[i], (uint32_t)i);
        std::vector<double> t(reps);
        for (int r = 0; r < reps; r++) {
            double t0 = now();
#pragma omp parallel num_threads(threads)
            {
                int th = omp_get_thread_num(), nt = omp_get_num_threads();
                for (int64_t b0 = 0; b0 < FIND_KEYS; b0 += FIND_BATCH) {
                    int64_t lo = b0 + FIND_BATCH * th / nt, hi = b0 + FIND_BATCH * (th + 1) / nt;
                    for (int64_t i = lo; i < hi; i++) {
                        const Map &mm = m[shards > 1 ? mix(queries[i]) >> 63 : 0];
                        auto it = mm.find(queries[i]);
                        out[i] = it == mm.end() ? UINT32_MAX : it->second;
                    }
                }
            }
            t[r] = (now() - t0) * 1e9 / FIND_KEYS;
        }
        emit(impl, "find", load, m[0].load_factor(), threads, n, median(t), reps);
        for (int r = 0; r < reps; r++) {
            std::vector<Map> c(m);
            double t0 = now();
#pragma omp parallel num_threads(threads)
            {
                int th = omp_get_thread_num();
                for (int64_t i = 0; i < UPSERT_KEYS; i++) {
                    int s = shards > 1 ? (int)(mix(up[i]) >> 63) : 0;
                    if (s == th || shards == 1)
                        out[i] = c[s].try_emplace(up[i], (uint32_t)i).first->second;
                }
            }
            t[r] = (now() - t0) * 1e9 / UPSERT_KEYS;
        }
        emit(impl, "upsert", load, m[0].load_factor(), threads, n, median(t), reps);
    }
}

int main(int argc, char **argv)
{
    int K = 23, reps = 5, max_threads = 2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--log2-buckets") && i + 1 < argc)
            K = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            max_threads = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--log2-buckets K] [--reps R] [--threads T]\n", argv[0]);
            return 2;
        }
    }
    const double loads[] = {0.5, 0.9, 0.95};
    uint64_t buckets = (uint64_t)1 << K;
    std::vector<uint64_t> queries(FIND_KEYS), up(UPSERT_KEYS);
    std::vector<uint32_t> out(FIND_KEYS);
    for (int li = 0; li < 3; li++) {
        double load = loads[li];
        int64_t n = (int64_t)(load * (double)buckets);
        uint64_t seed = 12345 + (uint64_t)li;
        std::vector<uint64_t> keys(n);
        for (int64_t i = 0; i < n; i++)
            keys[i] = rng(&seed);
        for (int64_t i = 0; i < FIND_KEYS; i++)
            queries[i] = keys[rng(&seed) % (uint64_t)n];
        for (int64_t i = 0; i < UPSERT_KEYS; i++)
            up[i] = i % 2 ? keys[rng(&seed) % (uint64_t)n] : rng(&seed);
        run<map_t>("absl", load, n, keys, queries, up, out, reps, max_threads);
        run<map_thp_t>("absl_thp", load, n, keys, queries, up, out, reps, max_threads);
    }
    return 0;
}
