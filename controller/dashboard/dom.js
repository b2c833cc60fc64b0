// Building DOM nodes without HTML strings: every text the API gives (an agent's screen, a diff, a
// branch name) lands as a text node, never as markup, and no `style` attribute is set (layout
// belongs in app.css).

/**
 * `h('a', { class: 'x', href, 'data-session': name, onclick }, child, …)`. Attributes that are
 * `false`, `null` or `undefined` are left out and `true` sets an empty one; `on…` functions become
 * listeners; children are nodes, strings, numbers, arrays of them, or nothing.
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === false || v === null || v === undefined) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'style') throw new Error('no style attributes: layout belongs in app.css');
    else if (k === 'value') el.value = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

/** Appends children as `h` takes them. */
export function append(el, children) {
  for (const c of [children].flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** Replaces the children of `el`. */
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

/** Shows `text` in the page's one message area, `#toast`, for a while (a click hides it); `ok` colours it. */
export function toast(text, ok = true) {
  const el = document.getElementById('toast');
  if (!el) return;
  el.textContent = text;
  el.dataset.kind = ok ? 'ok' : 'error';
  el.hidden = false;
  el.onclick = () => {
    el.hidden = true;
  };
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => {
    el.hidden = true;
  }, 10000);
}
