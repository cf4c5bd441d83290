// Form fields for declared values ({name: {type, description, default, enum}}): flow inputs
// and approval gate fields. Values are read back with their declared JSON types.

function input(name, spec, prefix) {
  const id = `${prefix}-${name}`;
  const type = spec.type || "any";
  const hasDefault = spec.default !== undefined && spec.default !== null;
  let control;
  if (Array.isArray(spec.enum) && spec.enum.length) {
    control = document.createElement("select");
    for (const choice of spec.enum) {
      const option = document.createElement("option");
      option.value = JSON.stringify(choice);
      option.textContent = String(choice);
      if (hasDefault && choice === spec.default) option.selected = true;
      control.append(option);
    }
  } else if (type === "boolean") {
    control = document.createElement("input");
    control.type = "checkbox";
    control.checked = Boolean(spec.default);
  } else if (type === "array" || type === "object" || type === "any") {
    control = document.createElement("textarea");
    control.rows = 2;
    control.placeholder = type === "any" ? "text or JSON" : `JSON ${type}`;
    if (hasDefault) control.value = typeof spec.default === "string" ? spec.default : JSON.stringify(spec.default);
  } else {
    control = document.createElement("input");
    control.type = type === "integer" || type === "number" ? "number" : "text";
    if (type === "number") control.step = "any";
    if (hasDefault) control.placeholder = String(spec.default);
  }
  control.id = id;
  control.name = name;
  control.dataset.field = name;
  return control;
}

/** Label, control and hint elements for a grid of fields. */
export function fieldInputs(fields, prefix) {
  const nodes = [];
  for (const [name, spec] of Object.entries(fields)) {
    const label = document.createElement("label");
    label.htmlFor = `${prefix}-${name}`;
    label.textContent = name;
    nodes.push(label, input(name, spec || {}, prefix));
    if (spec && spec.description) {
      const hint = document.createElement("span");
      hint.className = "hint";
      hint.textContent = spec.description;
      nodes.push(hint);
    }
  }
  return nodes;
}

/** Values typed into `container` for `fields`; empty optional fields are left out. */
export function collectValues(container, fields) {
  const values = {};
  for (const [name, spec] of Object.entries(fields)) {
    const control = container.querySelector(`[data-field="${CSS.escape(name)}"]`);
    if (!control) continue;
    const type = (spec && spec.type) || "any";
    if (control.tagName === "SELECT") { values[name] = JSON.parse(control.value); continue; }
    if (type === "boolean") { values[name] = control.checked; continue; }
    const text = control.value.trim();
    if (text === "") continue;  // the server applies defaults and reports missing required values
    if (type === "integer" || type === "number") values[name] = Number(text);
    else if (type === "array" || type === "object") {
      try { values[name] = JSON.parse(text); } catch { throw new Error(`${name}: not valid JSON`); }
    } else if (type === "any") {
      try { values[name] = JSON.parse(text); } catch { values[name] = text; }
    } else values[name] = control.value;
  }
  return values;
}
