"""make_movies.py: writes movies.csv and movies_eval.csv, the small example of docs/data.md.

A click depends on every column: the user's taste, age, gender, price, hour and genres
(weighted), through a fixed random teacher, so a model that reads the columns learns it.
Run: python3 make_movies.py (seeded: the same files every time)."""
import math
import random

GENRES = ["Action", "Comedy", "Drama", "Romance", "Horror", "SciFi", "Documentary", "Animation"]


def write(path, n, rng, teacher):
    with open(path, "w") as f:
        f.write("clicked,user,age,gender,price,hour,genres,comment\n")
        for _ in range(n):
            u = rng.randrange(300)
            age = rng.randrange(16, 70)
            gender = rng.choice(["Female", "Male", "Other"])
            price = round(rng.lognormvariate(2.0, 0.6), 2)
            hour = rng.randrange(0, 24)
            gs = rng.sample(GENRES, rng.randint(1, 3))
            ws = [rng.choice([1.0, 0.5]) for _ in gs]
            z = teacher["user"][u] + 0.02 * (40 - age) + teacher["gender"][gender] - 0.1 * (price - 8)
            z += 0.8 * math.cos(hour / 24 * 2 * math.pi) + sum(w * teacher["genre"][g] for g, w in zip(gs, ws))
            y = 1 if rng.random() < 1 / (1 + math.exp(-z)) else 0
            items = "|".join(g if w == 1.0 else "%s:%g" % (g, w) for g, w in zip(gs, ws))
            comment = rng.choice(["", "nice", "\"long, but good\"", "meh"])
            f.write("%d,u%04d,%d,%s,%s,%d,%s,%s\n" % (y, u, age, gender, price, hour, items, comment))


rng = random.Random(7)
teacher = {"user": [rng.gauss(0, 1.2) for _ in range(300)],
           "gender": {"Female": 0.4, "Male": -0.3, "Other": 0.0},
           "genre": {g: rng.gauss(0, 1) for g in GENRES}}
write("movies.csv", 8500, rng, teacher)
write("movies_eval.csv", 1500, rng, teacher)
