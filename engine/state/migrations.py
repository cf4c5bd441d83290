"""The schema of Blockyard's own tables (runs, events, definitions, gates, threads, ...): versioned
migrations, applied at start by every process that opens the state database, SQLite here and
Postgres in engine/state/postgres.py (the same statements).
"""

from __future__ import annotations

import sqlite3

from engine.state.database import StateError

# Each migration is a list of statements applied in one transaction, never edited once released.
MIGRATIONS: list[tuple[int, list[str]]] = [
    (
        1,
        [
            """CREATE TABLE definitions (
            digest TEXT PRIMARY KEY,
            flow TEXT NOT NULL,
            version INTEGER NOT NULL,
            bundle TEXT NOT NULL,
            created TEXT NOT NULL
        )""",
            """CREATE TABLE runs (
            id TEXT PRIMARY KEY,
            flow TEXT NOT NULL,
            version INTEGER NOT NULL,
            digest TEXT NOT NULL REFERENCES definitions(digest),
            status TEXT NOT NULL,
            inputs TEXT NOT NULL,
            outputs TEXT,
            error TEXT,
            error_step TEXT,
            thread_id TEXT,
            parent TEXT,
            owner_pid INTEGER,
            owner_host TEXT,
            owner_start TEXT,
            created TEXT NOT NULL,
            started TEXT,
            finished TEXT,
            duration REAL NOT NULL DEFAULT 0
        )""",
            "CREATE INDEX runs_flow ON runs (flow, id)",
            "CREATE INDEX runs_status ON runs (status, id)",
            """CREATE TABLE events (
            run_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            type TEXT NOT NULL,
            step TEXT,
            time TEXT NOT NULL,
            data TEXT NOT NULL,
            PRIMARY KEY (run_id, seq)
        ) WITHOUT ROWID""",
        ],
    ),
    (
        2,
        [
            # approval gates a run stopped at, and the decision taken on each (engine/state/gates.py)
            """CREATE TABLE gates (
            run_id TEXT NOT NULL,
            interrupt_id TEXT NOT NULL,
            gate TEXT NOT NULL,
            step TEXT NOT NULL,
            status TEXT NOT NULL,
            request TEXT NOT NULL,
            created TEXT NOT NULL,
            timeout_at TEXT,
            decided TEXT,
            actor TEXT,
            decision TEXT,
            PRIMARY KEY (run_id, interrupt_id)
        ) WITHOUT ROWID""",
            "CREATE INDEX gates_waiting ON gates (status, timeout_at)",
            # conversation threads: runs that share one LangGraph thread (engine/state/threads.py)
            """CREATE TABLE threads (
            id TEXT PRIMARY KEY,
            flow TEXT NOT NULL,
            title TEXT NOT NULL,
            created TEXT NOT NULL,
            updated TEXT NOT NULL,
            turns INTEGER NOT NULL DEFAULT 0,
            last_run TEXT
        )""",
            "CREATE INDEX runs_thread ON runs (thread_id, id)",
        ],
    ),
    (
        3,
        [
            # a thread's name (engine/runtime/naming.py) and the checkpoint of its last finished turn,
            # which the next turn starts from (engine/runtime/turns.py)
            "ALTER TABLE threads ADD COLUMN name TEXT",
            "ALTER TABLE threads ADD COLUMN checkpoint TEXT",
            "UPDATE threads SET checkpoint = '*'",  # threads from before: their turns go on from the latest checkpoint
            # the conversation of each thread, for people and UIs (engine/state/messages.py)
            """CREATE TABLE messages (
            thread_id TEXT NOT NULL,
            idx INTEGER NOT NULL,
            role TEXT NOT NULL,
            content TEXT NOT NULL,
            run_id TEXT NOT NULL,
            created TEXT NOT NULL,
            PRIMARY KEY (thread_id, idx)
        ) WITHOUT ROWID""",
            "CREATE UNIQUE INDEX messages_run ON messages (run_id, role)",
        ],
    ),
    (
        4,
        [
            # the server's schedules (engine/serve/schedules.py), as a migration so that servers sharing
            # a Postgres database never race to create it (a SQLite file may have it already)
            """CREATE TABLE IF NOT EXISTS serve_schedules (
            flow TEXT PRIMARY KEY,
            schedule TEXT NOT NULL,
            first_seen TEXT NOT NULL,
            last_fire TEXT,
            last_run TEXT
        )""",
        ],
    ),
    (
        5,
        [
            # leases of server replicas on the runs they execute (engine/state/liveness.py): the
            # replica's id and when its lease runs out unless its heartbeat pushes it ahead
            "ALTER TABLE runs ADD COLUMN owner_replica TEXT",
            "ALTER TABLE runs ADD COLUMN lease_until REAL",
            "CREATE INDEX runs_replica ON runs (owner_replica, status)",
        ],
    ),
    (
        6,
        [
            # a thread's metadata, as LangGraph Server API clients give it (engine/serve/langgraph_api/): a JSON object
            "ALTER TABLE threads ADD COLUMN metadata TEXT",
        ],
    ),
    (
        7,
        [
            # the durability mode a run was started in (docs/runtime.md, "Durability"); NULL for runs from
            # before, which were all sync
            "ALTER TABLE runs ADD COLUMN durability TEXT",
        ],
    ),
    (
        8,
        [
            # `runs` lists newest first by start time (NEWEST_FIRST): without this, every listing sorts
            # the whole table; and `gc` finds finished runs by when they finished (engine/state/retention.py)
            "CREATE INDEX runs_newest ON runs ((COALESCE(started, created)), id)",
            "CREATE INDEX runs_finished ON runs (status, finished)",
            # chores of the server done once a day across replicas (the daily gc: engine/serve/chores.py)
            """CREATE TABLE serve_chores (
            name TEXT PRIMARY KEY,
            last_done TEXT NOT NULL
        )""",
        ],
    ),
    (
        9,
        [
            # a server records a run it accepts as `queued` before answering (any replica may start it,
            # docs/postgres.md "The queue"): what it was asked for travels with it, so that whichever
            # server starts it runs it the same way: the yard folder it writes to, and whether it keeps
            # its event trace (1, or 0 for `trace: false`, which only durability none allows; NULL for
            # runs from before, which all kept it). Its durability mode is in `durability` (migration 7)
            "ALTER TABLE runs ADD COLUMN output_dir TEXT",
            "ALTER TABLE runs ADD COLUMN trace INTEGER",
        ],
    ),
    (
        10,
        [
            # steps finished inside one LangGraph node of a durable run, each committed before the next
            # begins (engine/state/inline_steps.py): what a resume goes on after
            """CREATE TABLE inline_steps (
            thread_id TEXT NOT NULL,
            checkpoint_ns TEXT NOT NULL,
            seq INTEGER NOT NULL,
            next TEXT NOT NULL,
            type TEXT NOT NULL,
            value BLOB NOT NULL,
            PRIMARY KEY (thread_id, checkpoint_ns, seq)
        )""",
        ],
    ),
    (
        11,
        [
            # what a run's model calls spent (engine/core/usage.py): set as each execution ends, from the sum
            # of its model_call events, so `blockyard runs`, `stats` and budgets need no trace scan
            "ALTER TABLE runs ADD COLUMN model_calls INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE runs ADD COLUMN input_tokens INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE runs ADD COLUMN output_tokens INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE runs ADD COLUMN cached_tokens INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE runs ADD COLUMN reasoning_tokens INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE runs ADD COLUMN cost_usd REAL NOT NULL DEFAULT 0",
            "ALTER TABLE runs ADD COLUMN unpriced_calls INTEGER NOT NULL DEFAULT 0",
            # the budget the run is held to (engine/spec/budget.py), JSON; NULL: none
            "ALTER TABLE runs ADD COLUMN budget TEXT",
        ],
    ),
    (
        12,
        [
            # what `blockyard eval` found, one row per eval, side and invocation (engine/evals/history.py): the
            # flow version it ran (`digest`, the pinned definition's; `version`, its `version:`), the revision,
            # the totals, and each case's result as JSON. `blockyard eval --history NAME` reads them by version
            """CREATE TABLE eval_results (
            id TEXT PRIMARY KEY,
            eval TEXT NOT NULL,
            target TEXT NOT NULL,
            digest TEXT,
            version INTEGER,
            side TEXT NOT NULL,
            label TEXT NOT NULL,
            revision TEXT,
            created TEXT NOT NULL,
            cases INTEGER NOT NULL,
            passed INTEGER NOT NULL,
            pass_rate REAL NOT NULL,
            mean_score REAL NOT NULL,
            cost_usd REAL NOT NULL,
            unpriced_calls INTEGER NOT NULL,
            tokens INTEGER NOT NULL,
            latency_ms REAL NOT NULL,
            ok INTEGER NOT NULL,
            results TEXT NOT NULL
        )""",
            "CREATE INDEX eval_results_eval ON eval_results (eval, created)",
        ],
    ),
    (
        13,
        [
            # the W3C traceparent of the HTTP caller that queued the run: its first execution continues the
            # caller's trace on whichever server starts it (engine/runtime/engine.py, `start_queued`)
            "ALTER TABLE runs ADD COLUMN traceparent TEXT",
        ],
    ),
    (
        14,
        [
            # crons created over the LangGraph API (engine/serve/crons.py): runtime objects, apart from the
            # `schedule:` of flows in Git; their fire times are claimed in serve_schedules as "cron:<id>"
            """CREATE TABLE api_crons (
            id TEXT PRIMARY KEY,
            flow TEXT NOT NULL,
            thread_id TEXT,
            cron TEXT NOT NULL,
            timezone TEXT NOT NULL,
            payload TEXT NOT NULL,
            metadata TEXT NOT NULL,
            enabled INTEGER NOT NULL,
            end_time TEXT,
            created TEXT NOT NULL,
            updated TEXT NOT NULL
        )""",
        ],
    ),
    (
        15,
        [
            # the finished turn of its thread a turn goes on from (engine/state/branches.py): threads branch
            # when a turn starts from an earlier one; NULL: the first turn of its branch
            "ALTER TABLE runs ADD COLUMN after_turn TEXT",
            # the turn whose message a turn says again (a regenerated answer, engine/serve/langgraph_api/branching.py)
            "ALTER TABLE runs ADD COLUMN regenerates TEXT",
            # whether a turn of the thread ever went on from another than the thread's latest finished turn
            "ALTER TABLE threads ADD COLUMN branched INTEGER NOT NULL DEFAULT 0",
            # turns from before: each went on from the finished turn before it (the previous `user` row)
            "UPDATE runs SET after_turn = (SELECT earlier.run_id FROM messages AS own "
            "JOIN messages AS earlier ON earlier.thread_id = own.thread_id AND earlier.role = 'user' "
            "AND earlier.idx < own.idx WHERE own.run_id = runs.id AND own.role = 'user' "
            "ORDER BY earlier.idx DESC LIMIT 1) WHERE thread_id IS NOT NULL",
        ],
    ),
    (
        16,
        [
            # a thread's written inputs (engine/state/thread_inputs.py): JSON of the values later turns take
            # for the inputs their runs do not give, and the record of the writes; NULL: none
            "ALTER TABLE threads ADD COLUMN inputs TEXT",
        ],
    ),
]
SCHEMA_VERSION = MIGRATIONS[-1][0]


def migrate(conn: sqlite3.Connection, now: str) -> None:
    """Bring our tables to SCHEMA_VERSION; safe when several processes open the file at once."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS blockyard_migrations (version INTEGER PRIMARY KEY, applied TEXT NOT NULL)"
    )
    if _applied(conn) >= SCHEMA_VERSION:
        _check_not_newer(conn)
        return
    # re-read under the write lock: another process may have migrated
    conn.execute("BEGIN IMMEDIATE")
    try:
        current = _applied(conn)
        for version, statements in MIGRATIONS:
            if version <= current:
                continue
            for statement in statements:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO blockyard_migrations (version, applied) VALUES (?, ?)", (version, now)
            )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    _check_not_newer(conn)


def _applied(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT MAX(version) FROM blockyard_migrations").fetchone()
    return int(row[0] or 0)


def _check_not_newer(conn: sqlite3.Connection) -> None:
    check_version(_applied(conn))


def check_version(found: int) -> None:
    """A database migrated by a newer blockyard is refused: its tables may mean something else."""
    if found > SCHEMA_VERSION:
        raise StateError(
            f"the state database has schema version {found}, newer than this blockyard "
            f"understands ({SCHEMA_VERSION}); upgrade blockyard"
        )
