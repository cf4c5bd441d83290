"""The tests that never open a state database, and the guard that keeps that list true.

The Postgres pass (BLOCKYARD_TEST_DATABASE=postgres, tests/conftest.py) exists to run the engine's
state database on Postgres; a test that never opens one — validation, compiling, templates, the
model providers, review text, type checks, packaging — runs there exactly as in the SQLite pass and
proves nothing the second time. The Postgres pass does not collect the test files and folders in
STATELESS (importing and collecting them cost each of its workers ~1 s of CPU for nothing), and
deselects the test functions in it; its summary counts both.

The list is kept true by the SQLite pass: there every test of a listed file runs with
BLOCKYARD_DATABASE_URL naming a "tripwire", a Postgres URL whose server is a listener on 127.0.0.1
that records each connection and closes it. Whatever would open the state database — the engine, the
CLI, a server, a child process (which inherits the environment) — reads that URL, as it would read the
real one in the Postgres pass, and connects there; `state_backend`'s teardown then fails the test
("... is listed as stateless but opened a state database: remove it from the list"), whether or not
the test's own assertions passed. Using the Postgres test cluster (`pg_url`, `postgres_cluster()`) or
asking which pass this is (`test_backend()`) fails it the same way: such a test differs between passes.

A test that sets or clears BLOCKYARD_DATABASE_URL itself escapes the tripwire, but it escapes the
Postgres pass the same way: it runs identically in both, so listing it loses nothing.

To rebuild the list: `BLOCKYARD_TEST_FIND_STATELESS=1 python -m pytest` puts every test behind the
tripwire without failing it, and prints the files (and whole folders) where every test passed without
opening a state database, and in the other files the test functions that did; tests that do open one
fail in that run, as they should.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from engine.state.location import URL_ENV

FIND_ENV = "BLOCKYARD_TEST_FIND_STATELESS"
PROPERTY = "stateless_guard"  # the user property a test's report carries in the finding run
OUTPUT = "stateless_deselected"  # what a pytest-xdist worker hands its controller: the tests it deselected,
UNCOLLECTED = "stateless_uncollected"  # and the listed files and folders it did not collect
SYNC_TIMEOUT = 10.0  # seconds the teardown waits for the listener to take its own probe connection

# Files end in .py, folders in / (every file under them, including new ones: the guard checks those too),
# and a test function is its file and name (`file.py::test_x`: every parameter of it; a new test in that
# file is not listed, so it runs in both passes until a finding run lists it).
# Found by the finding run (below): every test of these passed behind the tripwire without opening a
# state database. Some open a SQLite file by its path (the writer, the saver, the run store) or start a
# server in a module-scoped fixture before any test's URL is set: they run on SQLite in either pass.
STATELESS: tuple[str, ...] = (
    "tests/agents/test_agent_flows.py::test_the_drawing_hangs_delegated_steps_off_their_agent",
    "tests/agents/test_agent_validation.py",
    "tests/agents/test_example_swe_team.py::test_the_graph_draws_the_fan_out_and_the_bounded_back_edge",
    "tests/agents/test_mcp_tools.py::test_a_tool_name_clash_is_refused",
    "tests/agents/test_mcp_tools.py::test_allow_listed_tools_are_described_by_the_server_and_called",
    "tests/agents/test_mcp_tools.py::test_an_allow_listed_tool_the_server_lacks",
    "tests/agents/test_mcp_tools.py::test_validate_knows_the_allow_list_without_starting_anything",
    "tests/agents/test_mcp_tools.py::test_without_the_extra_the_message_names_it",
    "tests/approvals/test_decisions.py::test_the_graph_shows_gates_and_their_exits",
    "tests/compile/",
    "tests/docs/",  # the docs' walks: their shells drop BLOCKYARD_* (docs_walk.newcomer_environment)
    "tests/evals/test_assertions.py",
    "tests/evals/test_eval_files.py",  # validate, and `blockyard eval` refusing broken eval files before it opens one
    "tests/evals/test_reply_cache.py",
    "tests/executors/",
    "tests/hostile/",  # their children drop BLOCKYARD_* (hostile_harness.child_env): a SQLite file in both passes
    "tests/interchange/test_compose.py::test_a_plan_only_problem_is_repaired_too",
    "tests/interchange/test_compose.py::test_a_repair_request_carries_the_plan_and_its_problems",
    "tests/interchange/test_compose.py::test_a_yard_without_blocks_has_nothing_to_compose_from",
    "tests/interchange/test_compose.py::test_compose_refuses_to_overwrite_without_force",
    "tests/interchange/test_compose.py::test_compose_writes_a_flow_of_the_example_yard_that_validates",
    "tests/interchange/test_compose.py::test_the_model_repairs_its_plan_from_the_diagnostics",
    "tests/interchange/test_compose.py::test_three_wrong_plans_fail_with_the_problems_and_write_nothing",
    "tests/interchange/test_compose.py::test_usage_errors_are_one_line",
    "tests/interchange/test_reactflow_import.py::test_a_broken_graph_is_refused_naming_the_node",
    "tests/interchange/test_reactflow_import.py::test_not_json_and_not_a_graph_are_one_line_errors",
    "tests/interchange/test_taskplan_cli.py::test_a_wrong_plan_is_reported_in_the_plan",
    "tests/interchange/test_taskplan_cli.py::test_import_taskplan_writes_a_flow_that_validates",
    "tests/models/test_anthropic_provider.py::test_a_bad_output_is_repaired_by_one_retry",
    "tests/models/test_anthropic_provider.py::test_a_block_named_like_a_choice_is_still_forced_by_name",
    "tests/models/test_anthropic_provider.py::test_a_gateway_keeps_its_path",
    "tests/models/test_anthropic_provider.py::test_a_profile_without_a_model_name_is_refused",
    "tests/models/test_anthropic_provider.py::test_a_rejected_key_is_permanent_and_names_the_variable",
    "tests/models/test_anthropic_provider.py::test_a_timeout_is_transient",
    "tests/models/test_anthropic_provider.py::test_an_unreachable_server_is_a_connection_error",
    "tests/models/test_anthropic_provider.py::test_client_errors_are_never_transient",
    "tests/models/test_anthropic_provider.py::test_max_retries_retries_inside_the_client",
    "tests/models/test_anthropic_provider.py::test_rate_limits_and_server_errors_are_transient",
    "tests/models/test_anthropic_provider.py::test_structured_output_is_a_tool_forced_by_name_over_the_wire",
    "tests/models/test_anthropic_provider.py::test_the_key_comes_from_anthropic_api_key_by_default",
    "tests/models/test_anthropic_provider.py::test_tokens_are_streamed_as_the_server_sends_them",
    "tests/models/test_anthropic_provider.py::test_unset_settings_are_left_to_the_client",
    "tests/models/test_anthropic_provider.py::test_without_the_extra_a_clear_error_names_it",
    "tests/models/test_azure_provider.py",
    "tests/models/test_google_provider.py::test_a_bad_output_is_repaired_by_one_retry",
    "tests/models/test_google_provider.py::test_a_block_named_like_a_mode_is_still_forced_by_name",
    "tests/models/test_google_provider.py::test_a_rejected_key_is_permanent_and_names_the_variable",
    "tests/models/test_google_provider.py::test_a_timeout_is_transient",
    "tests/models/test_google_provider.py::test_an_unreachable_server_is_a_connection_error",
    "tests/models/test_google_provider.py::test_client_errors_are_never_transient",
    "tests/models/test_google_provider.py::test_gemini_through_its_openai_compatible_endpoint_needs_no_extra",
    "tests/models/test_google_provider.py::test_max_retries_retries_inside_the_client",
    "tests/models/test_google_provider.py::test_rate_limits_and_server_errors_are_transient",
    "tests/models/test_google_provider.py::test_structured_output_is_a_forced_function_call_over_the_wire",
    "tests/models/test_google_provider.py::test_the_key_comes_from_google_api_key_by_default",
    "tests/models/test_google_provider.py::test_tokens_are_streamed_as_the_server_sends_them",
    "tests/models/test_google_provider.py::test_without_the_extra_a_clear_error_names_it",
    "tests/models/test_mock_model.py",
    "tests/models/test_mock_plans.py",
    "tests/models/test_mock_values.py",
    "tests/models/test_model_errors.py",
    "tests/models/test_model_imports.py",
    "tests/models/test_model_resolver.py",
    "tests/models/test_model_secrets.py",
    "tests/models/test_model_usage.py::test_the_price_table_is_litellms_for_the_providers_own_endpoints",
    "tests/models/test_openai_provider.py",
    "tests/models/test_reply_rules.py",
    "tests/models/test_token_streaming.py::test_a_json_answer_in_the_content_streams_its_text_field",
    "tests/models/test_token_streaming.py::test_an_agent_final_answer_call_is_streamed",
    "tests/models/test_token_streaming.py::test_an_llm_reply_inside_a_tool_call_is_streamed_as_decoded_text",
    "tests/models/test_token_streaming.py::test_several_outputs_stream_no_json",
    "tests/models/test_token_streaming.py::test_the_streamed_field_is_the_only_text_output",
    "tests/models/test_token_streaming.py::test_the_text_field_is_decoded_from_json_arriving_in_pieces",
    "tests/review/test_diff.py",
    "tests/review/test_diff_formats.py",
    "tests/review/test_diff_mermaid.py",
    "tests/review/test_version_policy.py",
    "tests/runtime/test_accumulate.py::test_an_accumulated_key_written_another_way_is_refused",
    "tests/runtime/test_accumulate.py::test_graph_marks_accumulating_steps",
    "tests/runtime/test_accumulate.py::test_reduce_needs_a_list_or_an_object",
    "tests/runtime/test_cli_inputs.py::test_an_inputs_file_named_outside_the_yard_may_be_a_pipe",
    "tests/runtime/test_cli_inputs.py::test_bad_inputs_are_usage_errors",
    "tests/runtime/test_cli_inputs.py::test_inputs_file_then_flags",
    "tests/runtime/test_cli_inputs.py::test_values_are_typed",
    "tests/runtime/test_cli_inputs.py::test_wrong_type_and_unknown_names_are_named",
    "tests/runtime/test_cold_start.py::test_the_blockyard_script_imports_the_cli_with_the_collector_off",
    "tests/runtime/test_custom_events.py::test_a_payload_without_the_mark_or_with_an_engine_name_is_not_a_custom_event",
    "tests/runtime/test_custom_events.py::test_mistakes_in_emit_are_reported_at_line_and_column",
    "tests/runtime/test_custom_events.py::test_the_example_flow_is_clean",
    "tests/runtime/test_durable_saver.py",
    "tests/runtime/test_export_langgraph_server.py",
    "tests/runtime/test_event_positions.py::test_plain_lines_name_the_item_and_the_pass",
    "tests/runtime/test_event_positions.py::test_the_live_table_names_the_latest_item_and_pass",
    "tests/runtime/test_flow_closure.py::test_a_broken_config_stops_every_flow",
    "tests/runtime/test_flow_closure.py::test_a_broken_delegated_flow_stops_the_agent_flow_that_delegates_to_it",
    "tests/runtime/test_flow_closure.py::test_a_broken_subflow_or_block_stops_the_flows_that_use_them",
    "tests/runtime/test_flow_closure.py::test_a_flow_whose_file_does_not_load_is_not_called_unknown",
    "tests/runtime/test_flow_closure.py::test_graph_judges_one_flow",
    "tests/runtime/test_flow_closure.py::test_run_a_broken_flow_prints_its_diagnostics_once",
    "tests/runtime/test_flow_closure.py::test_running_a_flow_checks_only_its_closure",
    "tests/runtime/test_flow_closure.py::test_the_closure_check_finds_every_problem_the_whole_check_finds",
    "tests/runtime/test_flow_closure.py::test_the_prompt_files_a_flow_uses_are_part_of_its_closure",
    "tests/runtime/test_hostile_values.py::test_a_gate_deadline_from_a_pinned_absurd_timeout_does_not_overflow",
    "tests/runtime/test_hostile_values.py::test_a_huge_value_in_an_inputs_file_is_a_usage_error",
    "tests/runtime/test_hostile_values.py::test_absurd_durations_are_held_to_the_maximum_at_run_time",
    "tests/runtime/test_hostile_values.py::test_command_line_arguments_that_are_not_utf8_are_a_usage_error",
    "tests/runtime/test_hostile_values.py::test_the_same_from_a_real_command_line",
    "tests/runtime/test_observe.py",
    "tests/runtime/test_output_dir.py::test_an_output_folder_outside_the_yard_is_a_usage_error",
    "tests/runtime/test_progress_display.py",
    "tests/runtime/test_prompt_files.py::test_a_prompt_file_outside_the_yard_is_refused",
    "tests/runtime/test_prompt_files.py::test_include_stays_refused_outside_prompts",
    "tests/runtime/test_prompt_files.py::test_memory_variables_in_a_prompt_file_need_a_memory_scope",
    "tests/runtime/test_prompt_files.py::test_validate_checks_prompt_files_where_the_prompt_names_them",
    "tests/runtime/test_router_conversation.py::test_the_conversation_is_only_for_routers",
    "tests/runtime/test_run_cli.py::test_graph_command",
    "tests/runtime/test_run_store.py",
    "tests/runtime/test_runs_listing.py::test_runs_started_in_the_same_millisecond_keep_one_order",
    "tests/runtime/test_runs_listing.py::test_step_summary_counts_attempts_and_items",
    "tests/runtime/test_standalone_graph.py",
    "tests/runtime/test_writer.py",
    "tests/runtime/test_writer_inline.py",
    "tests/runtime/test_yard_api.py::test_compile_gives_the_langgraph_graph",
    "tests/serve/langgraph_api/test_langgraph_sdk.py::test_an_approval_gate_is_an_interrupt_resumed_with_a_command",
    "tests/serve/langgraph_api/test_langgraph_sdk.py::test_bad_requests_are_4xx",
    "tests/serve/langgraph_api/test_langgraph_sdk.py::test_cancel_a_run_and_multitask_strategies",
    "tests/serve/langgraph_api/test_langgraph_sdk.py::test_double_texting_interrupt_keeps_the_turn_it_stops_and_rollback_deletes_it",
    "tests/serve/langgraph_api/test_langgraph_sdk.py::test_info_ok_and_assistants_are_the_flows",
    "tests/serve/langgraph_api/test_langgraph_sdk.py::test_reconnect_a_stream_with_last_event_id",
    "tests/serve/langgraph_api/test_langgraph_sdk.py::test_stream_modes",
    "tests/serve/langgraph_api/test_langgraph_sdk.py::test_the_store_is_the_flows_memory",
    "tests/serve/langgraph_api/test_langgraph_sdk.py::test_threads_create_get_search_delete",
    "tests/serve/langgraph_api/test_langgraph_sdk.py::test_three_turns_of_support_chat_with_state_and_history",
    "tests/serve/langgraph_api/test_langgraph_sdk_js.py",
    "tests/serve/langgraph_api/test_usage_sdk.py",
    "tests/serve/langgraph_api/test_usage_sdk_js.py",
    "tests/serve/langgraph_api/test_usage_translate.py",
    "tests/serve/langgraph_api/test_usestream_page.py",
    "tests/serve/test_metrics_observer.py",
    "tests/serve/test_serve_auth.py",
    "tests/serve/test_serve_catalog.py",
    "tests/serve/test_serve_follow.py",
    "tests/serve/test_serve_graph.py::test_the_server_no_longer_reads_mermaid_back",
    "tests/serve/test_serve_hostile.py::test_a_bad_allowed_hosts_entry_is_a_validation_error",
    "tests/serve/test_serve_hostile.py::test_a_bad_last_event_id_is_a_400_and_the_largest_good_one_answers",
    "tests/serve/test_serve_hostile.py::test_a_body_over_the_default_limit_is_refused",
    "tests/serve/test_serve_hostile.py::test_a_declared_length_over_the_limit_is_refused_before_the_body_is_sent",
    "tests/serve/test_serve_hostile.py::test_a_foreign_host_cannot_read_the_runs",
    "tests/serve/test_serve_hostile.py::test_a_request_without_host_is_refused",
    "tests/serve/test_serve_hostile.py::test_an_unknown_flow_or_run_is_a_404_whatever_the_body",
    "tests/serve/test_serve_hostile.py::test_hostile_requests_get_a_4xx_json_problem",
    "tests/serve/test_serve_hostile.py::test_only_the_servers_own_names_are_answered",
    "tests/serve/test_serve_hostile.py::test_resume_values_the_engine_cannot_keep_are_a_422",
    "tests/serve/test_serve_hostile.py::test_values_the_engine_cannot_keep_are_a_422_naming_the_field",
    "tests/serve/test_serve_offload.py",
    "tests/serve/test_serve_ops.py::test_blockyard_serve_runs_the_example_yard",
    "tests/serve/test_serve_ops.py::test_watch_reports_on_every_save",
    "tests/serve/test_serve_ops.py::test_watch_text_output",
    "tests/serve/test_serve_reload.py",
    "tests/serve/test_serve_replicas.py::test_a_run_on_another_host_is_alive_until_its_lease_runs_out",
    "tests/serve/test_serve_schedules.py",
    "tests/smart/test_optimize.py::test_bad_examples",
    "tests/smart/test_optimize.py::test_runs_are_pinned_to_the_program",
    "tests/smart/test_optimize.py::test_without_dspy_optimize_names_the_extra",
    "tests/smart/test_optimize.py::test_wrong_blocks",
    "tests/smart/test_smart_blocks.py::test_a_compiled_program_linking_out_of_the_yard_is_not_pinned",
    "tests/smart/test_smart_blocks.py::test_validate_never_imports_dspy",
    "tests/smart/test_smart_blocks.py::test_without_the_extra_a_smart_block_does_not_compile",
    "tests/smart/test_smart_names.py",
    "tests/state/test_db_command.py::test_copy_names_every_column_of_the_tables_it_copies",
    "tests/state/test_db_command.py::test_copy_needs_a_postgres_url",
    "tests/state/test_db_command.py::test_db_status_of_a_sqlite_yard",
    "tests/state/test_fencing.py",
    "tests/state/test_gc.py::test_gc_refuses_a_retention_that_does_not_validate",
    "tests/state/test_liveness.py",
    "tests/state/test_stats_report.py",
    "tests/telemetry/test_batch.py",
    "tests/telemetry/test_settings.py",
    "tests/telemetry/test_wire.py",
    # the Action's steps and .ci/release-check run their children without BLOCKYARD_DATABASE_URL, as GitHub
    # does: `blockyard test` and `run hello` use the throw-away yard's own SQLite file in either pass
    "tests/test_action.py",
    "tests/test_architecture.py",
    "tests/test_cli_basics.py",
    "tests/test_cli_boundary.py",
    "tests/test_cpu_limit.py",
    "tests/test_cron.py::test_cron_is_parsed_in_one_module",
    "tests/test_cron.py::test_loading_the_cron_grammar_starts_no_process",
    "tests/test_cron.py::test_refused_expressions_say_why",
    "tests/test_cron.py::test_the_never_fires_search_is_bounded",
    "tests/test_cron.py::test_the_scheduler_does_not_crash_on_a_schedule_that_slipped_through",
    "tests/test_cron.py::test_time_zones",
    "tests/test_dbfile.py",
    "tests/test_docs_commands.py",
    "tests/test_docs_troubleshooting.py::test_every_message_is_quoted_on_the_page",
    "tests/test_docs_troubleshooting.py::test_no_yard_here",
    "tests/test_docs_vocabulary.py",
    "tests/test_errors.py",
    "tests/test_extras.py",
    "tests/test_flowtests.py::test_a_malformed_test_file_names_its_line",
    "tests/test_flowtests.py::test_a_test_file_linking_out_of_the_yard_is_refused_unread",
    "tests/test_flowtests.py::test_no_tests_is_a_failure",
    "tests/test_flowtests.py::test_turns_and_a_single_run_do_not_mix",
    "tests/test_forkserver.py",
    "tests/test_gcpause.py",
    "tests/test_load.py",
    "tests/test_loopback_clients.py",
    "tests/test_mutation_runner.py",
    "tests/test_packaging.py",
    "tests/test_postgres_cluster.py::test_only_our_folders_of_runs_that_are_gone_are_removed",
    "tests/test_redaction.py",
    "tests/test_reference.py",
    "tests/test_registries.py",
    "tests/test_release.py",
    "tests/test_spec_defaults.py",
    "tests/test_spec_delegation.py",
    "tests/test_spec_walk.py",
    "tests/test_stateless_guard.py::test_asking_for_the_pass_or_the_cluster_is_noted",
    "tests/test_stateless_guard.py::test_validation_behind_the_tripwire_opens_nothing_and_imports_no_psycopg",
    "tests/test_stateless_guard_suite.py",
    "tests/test_template_fast.py",
    "tests/test_template_guards.py",
    "tests/test_template_limits_nested.py",
    "tests/test_template_mutants.py",
    "tests/test_templates.py",
    "tests/test_test_hygiene.py",
    "tests/test_typecheck.py",
    "tests/test_typecheck_schema_verdict.py",
    "tests/test_values.py",
    "tests/test_yardfiles.py",
    "tests/threads/test_conversation.py::test_n_finished_turns_hold_exactly_2n_messages",
    "tests/threads/test_conversation.py::test_validate_names_history_on_a_kind_without_a_model_and_an_unknown_name_model",
    "tests/tools/",
    "tests/validate/",
)


def _function(nodeid: str) -> str:
    """A test's nodeid without its parameters (`file.py::test_x`): what an entry names below a file."""
    return nodeid.split("[", 1)[0]


def uncollected(path: str) -> str | None:
    """The entry of STATELESS that covers all of the file or folder `path` (relative to the repository,
    a folder ending in /), if any: the Postgres pass does not collect it."""
    for entry in STATELESS:
        if "::" not in entry and (
            entry == path or (entry.endswith("/") and path.startswith(entry))
        ):
            return entry
    return None


def listed(nodeid: str) -> str | None:
    """The entry of STATELESS that covers the test `nodeid` (a path relative to the repository), if any:
    its file or a folder above it, or the test function."""
    function = _function(nodeid)
    return uncollected(nodeid.split("::", 1)[0]) or (function if function in STATELESS else None)


def finding() -> bool:
    return os.environ.get(FIND_ENV, "").strip().lower() in ("1", "true", "yes")


@dataclass
class Tripwire:
    """A listener on 127.0.0.1 that accepts every connection, records it and closes it at once: what a
    client sees is a server that hung up (psycopg raises at once, nothing waits)."""

    sock: socket.socket = field(
        default_factory=lambda: socket.create_server(("127.0.0.1", 0), backlog=128)
    )
    _cond: threading.Condition = field(default_factory=threading.Condition)
    # the client port of each connection accepted, in order
    _peers: list[int] = field(default_factory=list)
    _probes: int = 0  # how many of them were our own (`connections`)

    def __post_init__(self) -> None:
        threading.Thread(target=self._serve, name="stateless-tripwire", daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    @property
    def url(self) -> str:
        # sslmode/gssencmode disabled: one connection attempt per open, not a retry without encryption
        return (
            f"postgresql://stateless:tripwire@127.0.0.1:{self.port}/stateless_tripwire"
            "?sslmode=disable&gssencmode=disable&connect_timeout=5"
        )

    def _serve(self) -> None:
        while True:
            conn, peer = self.sock.accept()
            conn.close()
            with self._cond:
                self._peers.append(int(peer[1]))
                self._cond.notify_all()

    def connections(self) -> int:
        """How many connections anyone has made so far. A connection whose connect() has returned sits
        in the kernel's accept queue until the thread takes it; the queue is first in, first out, so
        once our own probe connection has been taken, every earlier one has been counted."""
        with self._cond:
            start = len(self._peers)
        with socket.create_connection(("127.0.0.1", self.port), timeout=SYNC_TIMEOUT) as probe:
            mine = int(probe.getsockname()[1])
            with self._cond:
                if not self._cond.wait_for(
                    lambda: mine in self._peers[start:], timeout=SYNC_TIMEOUT
                ):
                    raise RuntimeError(
                        f"the stateless tripwire on port {self.port} stopped accepting"
                    )
                self._probes += 1
                return len(self._peers) - self._probes


_tripwire: Tripwire | None = None
_lock = threading.Lock()


def tripwire() -> Tripwire:
    """This test process's tripwire (one per pytest-xdist worker), started on first use."""
    global _tripwire
    with _lock:
        if _tripwire is None:
            _tripwire = Tripwire()
        return _tripwire


# What the running guarded test did that the tripwire cannot see (conftest's helpers call `note`).
_notes: list[str] | None = None


def note(what: str) -> None:
    """Record that the guarded test now running did something that differs between passes."""
    if _notes is not None and what not in _notes:
        _notes.append(what)


@dataclass
class Verdict:
    opened: int
    notes: list[str]

    def __bool__(self) -> bool:
        return bool(self.opened or self.notes)

    def message(self, entry: str, nodeid: str) -> str:
        what = (
            [f"opened a state database ({self.opened} connection(s) to {URL_ENV})"]
            if self.opened
            else []
        )
        return (
            f"{entry} is listed as stateless (tests/support/stateless.py) but {nodeid} "
            f"{' and '.join([*what, *self.notes])}: remove it from the list"
        )


@contextmanager
def watching(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Verdict]]:
    """Point BLOCKYARD_DATABASE_URL at the tripwire for the block; the list it yields holds the block's
    Verdict afterwards (connections made during it, notes taken)."""
    global _notes
    wire = tripwire()
    monkeypatch.setenv(URL_ENV, wire.url)
    before = wire.connections()
    verdicts: list[Verdict] = []
    _notes = []
    try:
        yield verdicts
    finally:
        notes, _notes = _notes, None
        verdicts.append(Verdict(wire.connections() - before, notes))


@contextmanager
def guard(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The SQLite pass's part of `state_backend` for a test that is listed (or for every test in the
    finding run): run it behind the tripwire, then fail it — or, finding, record what it did."""
    entry = listed(request.node.nodeid)
    find = finding()
    if entry is None and not find:
        yield
        return
    with watching(monkeypatch) as verdicts:
        yield
    verdict = verdicts[0]
    if find:
        request.node.user_properties.append((PROPERTY, "stateful" if verdict else "stateless"))
    elif verdict:
        pytest.fail(verdict.message(entry or "", request.node.nodeid), pytrace=False)


# ---- the finding run: which files never opened a state database ----------------------------------


@dataclass
class Findings:
    # files where some test failed, skipped or opened one
    stateful: set[str] = field(default_factory=set)
    seen: set[str] = field(default_factory=set)
    stateful_tests: set[str] = field(default_factory=set)  # the same, by test function (_function)
    seen_tests: set[str] = field(default_factory=set)

    def add(self, report: pytest.TestReport) -> None:
        path = report.nodeid.split("::", 1)[0]
        function = _function(report.nodeid)
        self.seen.add(path)
        self.seen_tests.add(function)
        # failed (it opened one and got an error, or it differs with a Postgres URL set) or skipped
        # (it may run only in one pass): not listed
        if not report.passed or (
            report.when == "teardown" and dict(report.user_properties).get(PROPERTY) != "stateless"
        ):
            self.stateful.add(path)
            self.stateful_tests.add(function)

    def entries(self) -> list[str]:
        """The stateless files, a folder's files collapsed to the folder when all of them are."""
        stateless = self.seen - self.stateful
        folders = {
            path[: index + 1]
            for path in self.seen
            for index, char in enumerate(path)
            if char == "/"
        }
        folders.discard("tests/")  # the whole suite is never one entry
        whole = {
            folder
            for folder in folders
            if not any(path.startswith(folder) for path in self.stateful)
        }
        outermost = {
            folder
            for folder in whole
            if not any(other != folder and folder.startswith(other) for other in whole)
        }
        files = {
            path for path in stateless if not any(path.startswith(folder) for folder in outermost)
        }
        # in a file where some test opens one: the test functions (every parameter of each) that do not
        tests = {
            test
            for test in self.seen_tests - self.stateful_tests
            if test.split("::", 1)[0] in self.stateful
        }
        return sorted(outermost | files | tests)


@dataclass
class Deselected:
    """A test a pytest-xdist worker deselected, as its controller's summary counts it (it has no items)."""

    nodeid: str


# ---- the plugin: tests/conftest.py registers it ----------------------------------------------------


def _not_on_postgres(item: pytest.Item) -> bool:
    """Whether the Postgres pass leaves `item` out: listed here, or marked sqlite_only."""
    return listed(item.nodeid) is not None or item.get_closest_marker("sqlite_only") is not None


class Plugin:
    """In the Postgres pass, leaves the listed files and folders uncollected and deselects the listed
    test functions and the tests marked sqlite_only (and says so in the summary, which pytest-xdist's
    controller would otherwise not count: the workers collect), and reports the finding run."""

    def __init__(self, config: pytest.Config, backend: str) -> None:
        self.config = config
        self.backend = backend
        self.deselected: list[str] = []
        self.uncollected: list[str] = []
        self.findings = Findings() if finding() else None
        if self.findings is not None:
            # hundreds of tests fail in the finding run (those that open a state database): plain Python
            # tracebacks, not pytest's source excerpts (parsing the source of one deep failure crashed them)
            config.option.tbstyle = "native"
        self.counted = False

    def pytest_ignore_collect(self, collection_path: Path) -> bool | None:
        if self.backend != "postgres":
            return None
        try:
            path = collection_path.relative_to(self.config.rootpath).as_posix()
        except ValueError:  # outside the repository: not ours to judge
            return None
        if uncollected(path + "/" if collection_path.is_dir() else path) is None:
            return None
        if self._asked(collection_path):
            self.uncollected.append(path)
        return True

    def _asked(self, path: Path) -> bool:
        """Whether `path` lies in what this run was asked for: pytest also consults the hook about the
        neighbours of a file or folder named on the command line, which would never be collected anyway."""
        path = path.resolve()
        targets = {
            (self.config.invocation_params.dir / arg.split("::", 1)[0]).resolve()
            for arg in self.config.args
        }
        return path in targets or not targets.isdisjoint(path.parents)

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        if self.backend != "postgres":
            return
        # a test marked sqlite_only is deselected here too, not skipped when it runs: a skip comes
        # after its module's fixtures, which may start a server for minutes of a core (Phoenix)
        keep: list[pytest.Item] = []
        dropped: list[pytest.Item] = []
        for item in items:
            (dropped if _not_on_postgres(item) else keep).append(item)
        if dropped:
            self.config.hook.pytest_deselected(items=dropped)
            items[:] = keep
            self.deselected = [item.nodeid for item in dropped]

    def pytest_sessionfinish(self) -> None:
        output = getattr(self.config, "workeroutput", None)
        if output is not None:  # a pytest-xdist worker: the controller counts what it deselected
            output[OUTPUT] = self.deselected
            output[UNCOLLECTED] = self.uncollected

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: object) -> None:
        """The controller: every worker collected (and deselected) the same tests; count them once."""
        output = getattr(node, "workeroutput", {})
        deselected, uncollected = list(output.get(OUTPUT, [])), list(output.get(UNCOLLECTED, []))
        if self.counted or not (deselected or uncollected):
            return
        self.counted = True
        self.deselected, self.uncollected = deselected, uncollected
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.stats.setdefault("deselected", []).extend(
                Deselected(nodeid) for nodeid in deselected
            )

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.findings is not None and not hasattr(self.config, "workerinput"):
            self.findings.add(report)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        done = [
            f"{count} {one if count == 1 else many}"
            for count, one, many in (
                (
                    len(self.uncollected),
                    "file or folder not collected",
                    "files and folders not collected",
                ),
                (len(self.deselected), "test deselected", "tests deselected"),
            )
            if count
        ]
        if done:
            terminalreporter.write_line(
                f"Postgres pass: {' and '.join(done)}, listed as stateless in tests/support/stateless.py "
                "(they never open a state database; the SQLite pass checks that)"
            )
        if self.findings is not None:
            terminalreporter.section(
                "stateless: no test opened a state database (tests/support/stateless.py)"
            )
            for entry in self.findings.entries():
                terminalreporter.write_line(f"    {entry!r},")
