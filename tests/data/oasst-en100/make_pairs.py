#!/usr/bin/env python3
"""Derives en_100.pairs.jsonl from the upstream en_100_tree.jsonl.gz.

Usage: python3 make_pairs.py [en_100_tree.jsonl.gz] > en_100.pairs.jsonl
"""
import gzip
import json
import sys

SOURCE = "LAION-AI/Open-Assistant:model/model_eval/manual/data/en_100_tree.jsonl"
ROLE = {"prompter": "user", "assistant": "assistant"}


def ranked_replies(msg):
    return sorted((r for r in msg.get("replies", [])
                   if r["role"] == "assistant" and r.get("rank") is not None
                   and not r.get("deleted")), key=lambda r: r["rank"])


def walk(tree_id, msg, path, out):
    path = path + [msg]
    if msg["role"] == "prompter":
        ranked = ranked_replies(msg)
        synthetic = any(m.get("synthetic") for m in path) or any(r.get("synthetic") for r in ranked)
        if len(ranked) >= 2 and not synthetic:
            context = [{"role": ROLE[m["role"]], "content": m["text"]} for m in path]
            for i, c in enumerate(ranked):
                for r in ranked[i + 1:]:
                    out.append({
                        "id": "oasst-en100:%s>%s" % (c["message_id"], r["message_id"]),
                        "source": SOURCE,
                        "message_tree_id": tree_id,
                        "parent_message_id": msg["message_id"],
                        "context": context,
                        "prompt": msg["text"],
                        "chosen": c["text"],
                        "rejected": r["text"],
                        "chosen_rank": c["rank"],
                        "rejected_rank": r["rank"],
                        "num_ranked_siblings": len(ranked),
                        "chosen_message_id": c["message_id"],
                        "rejected_message_id": r["message_id"],
                    })
    for reply in msg.get("replies", []):
        walk(tree_id, reply, path, out)


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "en_100_tree.jsonl.gz"
    out = []
    with gzip.open(src, "rt", encoding="utf-8") as f:
        for line in f:
            tree = json.loads(line)
            walk(tree["message_tree_id"], tree["prompt"], [], out)
    for p in out:
        sys.stdout.write(json.dumps(p, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
