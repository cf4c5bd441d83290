"""Request bodies of the HTTP API (validated by FastAPI, shown in the OpenAPI docs at /docs)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class RunRequest(BaseModel):
    """POST /flows/{name}/runs."""

    model_config = ConfigDict(extra="forbid")

    inputs: dict[str, Any] = Field(default_factory=dict, description="The flow's inputs, by name.")
    run_id: str | None = Field(None, description="Id for the run (default: generated).")


class ResumeRequest(BaseModel):
    """POST /runs/{id}/resume: a decision for a waiting gate, or nothing to continue a failed or
    interrupted run from its last checkpoint."""

    model_config = ConfigDict(extra="forbid")

    approve: bool | None = Field(None, description="true approves the waiting gate, false rejects it.")
    values: dict[str, Any] = Field(default_factory=dict, description="Values for the gate's fields.")
    reason: str | None = Field(None, description="Why (recorded in the trace).")
    gate: str | None = Field(None, description="Which gate, when several are waiting.")
    actor: str | None = Field(None, description="Who decides (checked against the gate's approvers).")

    def decision(self) -> dict[str, Any]:
        if self.approve is None:
            return {}
        return {"approve": self.approve, "values": self.values or None, "reason": self.reason,
                "gate": self.gate, "actor": self.actor}
