#!/usr/bin/env python3
"""multihot_like.py OUT.csv SAMPLES SEED STREAM [--no-header]: writes SAMPLES lines of a CSV with a
header, a label, dense and string categorical columns and one multi-hot column, for measurements
that need a general (non-Criteo) text file: bench/convert.sh converts it with the config that
`python3 bench/multihot_like.py --schema` prints.

Columns, in order (the header names them):
  clicked  label: 1 with probability 0.25
  age      int, 18..80
  visits   int, a geometric count (mean about 7); empty one time in ten
  days     int, -30..365 (negative values exercise log1p's max(x, 0))
  price    float, 0.01..500.00 with two decimals
  score    float, N(50, 20) with four decimals
  user     string, "u" + 7 digits, drawn from a Zipf(1.05) law over 1,000,000 users; empty 1 in 20
  country  string, two capital letters, Zipf(1.05) over 200 codes
  tags     multi-hot, 1 to 20 items (uniform count) separated by '|', each "t" + a number drawn from
           a Zipf(1.05) law over 50,000 tags

The samples depend on (SEED, STREAM) alone, so parts written by separate processes with different
STREAMs can be concatenated (--no-header for every part but the first). Standard library only.

`multihot_like.py --schema [ROWS]` prints the file's ember config (docs/data.md): a data.schema
alone, ROWS rows (default 100000) per sparse column (ids are the key mod ROWS).
"""
import random
import sys

USERS, COUNTRIES, TAGS = 1_000_000, 200, 50_000

SCHEMA = """data = {
  schema = {
    format = "csv";
    header = true;
    columns = (
      { name = "clicked"; type = "label"; },
      { name = "age";     type = "int";   transform = "log1p"; },
      { name = "visits";  type = "int";   transform = "log1p"; },
      { name = "days";    type = "int";   transform = "log1p"; },
      { name = "price";   type = "float"; transform = "clip"; min = 0.0; max = 100.0; },
      { name = "score";   type = "float"; transform = "standardize"; mean = 50.0; std = 20.0; },
      { name = "user";    type = "categorical"; encoding = "string"; rows = ROWS; },
      { name = "country"; type = "categorical"; encoding = "string"; rows = ROWS; },
      { name = "tags";    type = "multi_hot"; separator = "|"; rows = ROWS; }
    );
  };
};
"""


def zipf_cum(n, alpha=1.05):
    acc, out = 0.0, []
    for k in range(1, n + 1):
        acc += k ** -alpha
        out.append(acc)
    return out


def main():
    if sys.argv[1:2] == ["--schema"]:
        rows = sys.argv[2] if len(sys.argv) > 2 else "100000"
        sys.stdout.write(SCHEMA.replace("ROWS", rows))
        return
    args = [a for a in sys.argv[1:] if a != "--no-header"]
    out, n, seed, stream_id = args[0], int(args[1]), int(args[2]), int(args[3])
    rng = random.Random(seed * 7919 + stream_id * 104729 + 3)
    # fixed by SEED: which string each user / country / tag index is written as
    names = random.Random(seed)
    user_ids = names.sample(range(10_000_000), USERS)
    letters = [a + b for a in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" for b in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"]
    countries = names.sample(letters, COUNTRIES)
    tag_ids = names.sample(range(1_000_000), TAGS)
    users = ["u%07d" % u for u in user_ids]
    tags = ["t%d" % t for t in tag_ids]
    user_cum, country_cum, tag_cum = zipf_cum(USERS), zipf_cum(COUNTRIES), zipf_cum(TAGS)
    choices, rand, randint, gauss = rng.choices, rng.random, rng.randint, rng.gauss
    with open(out, "w") as fo:
        if "--no-header" not in sys.argv:
            fo.write("clicked,age,visits,days,price,score,user,country,tags\n")
        buf = []
        for i in range(n):
            visits = "" if rand() < 0.1 else str(int(rng.expovariate(0.15)))
            user = "" if rand() < 0.05 else choices(users, cum_weights=user_cum)[0]
            buf.append("%d,%d,%s,%d,%.2f,%.4f,%s,%s,%s\n" % (
                rand() < 0.25, randint(18, 80), visits, randint(-30, 365), randint(1, 50000) / 100.0,
                gauss(50.0, 20.0), user, choices(countries, cum_weights=country_cum)[0],
                "|".join(choices(tags, cum_weights=tag_cum, k=randint(1, 20)))))
            if len(buf) == 10000:
                fo.write("".join(buf))
                buf.clear()
        fo.write("".join(buf))


if __name__ == "__main__":
    main()
