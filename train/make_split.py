"""Write split.json (the held-out rows/articles) into every model folder without training, so
bert8's C evaluator can score exactly the data the Python side held out.

Run: /usr/bin/python3 train/make_split.py
"""
import os

import common
import data


def main():
    for task, folder in sorted(data.SPLIT_FOLDERS.items()):
        d = os.path.join(common.MODELS, folder)
        os.makedirs(d, exist_ok=True)
        common.write_json(os.path.join(d, "split.json"), data.split_definition(task))
        print("wrote", os.path.join(d, "split.json"))


if __name__ == "__main__":
    main()
