// Label selectors as the API reads them (`team=web`, `a!=b`, `tier in (x,y)`, `x notin (y)`,
// `key`, `!key`, joined by commas), parsed and matched in the page so the overview filters
// without asking the server again. Pure functions, checked by test/labels.test.mjs.

function lex(text) {
  const tokens = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (/\s/.test(c)) {
      i += 1;
    } else if (c === ',' || c === '(' || c === ')') {
      tokens.push({ op: c });
      i += 1;
    } else if (text.startsWith('==', i) || text.startsWith('!=', i)) {
      tokens.push({ op: text.slice(i, i + 2) });
      i += 2;
    } else if (c === '=' || c === '!') {
      tokens.push({ op: c });
      i += 1;
    } else {
      let j = i;
      while (j < text.length && !/[\s,()=!]/.test(text[j])) j += 1;
      tokens.push({ word: text.slice(i, j) });
      i = j;
    }
  }
  return tokens;
}

const shown = (t) => (t ? (t.word ?? t.op) : 'the end');

/**
 * Parses a selector. Returns `{ requirements }`, each `{ key, op, values }` with op one of
 * `=`, `!=`, `in`, `notin`, `exists`, `!exists`; or `{ error }` naming what is wrong.
 */
export function parseSelector(text) {
  const tokens = lex(text ?? '');
  let pos = 0;
  const peek = () => tokens[pos];
  const next = () => tokens[pos++];
  const word = (what) => {
    const t = next();
    if (!t || t.word === undefined) throw new Error(`expected ${what}, found ${shown(t)}`);
    return t.word;
  };
  const requirements = [];
  try {
    if (tokens.length === 0) return { requirements };
    for (;;) {
      if (peek()?.op === '!') {
        next();
        requirements.push({ key: word('a label key after `!`'), op: '!exists', values: [] });
      } else {
        const key = word('a label key');
        const t = peek();
        if (!t || t.op === ',') {
          requirements.push({ key, op: 'exists', values: [] });
        } else if (t.op === '=' || t.op === '==' || t.op === '!=') {
          next();
          const v = peek();
          const value = v && v.word !== undefined ? next().word : '';
          requirements.push({ key, op: t.op === '!=' ? '!=' : '=', values: [value] });
        } else if (t.word === 'in' || t.word === 'notin') {
          next();
          if (next()?.op !== '(') throw new Error(`expected \`(\` after \`${key} ${t.word}\``);
          const values = [];
          for (;;) {
            values.push(word('a value'));
            const sep = next();
            if (sep?.op === ')') break;
            if (sep?.op !== ',') throw new Error(`expected \`,\` or \`)\`, found ${shown(sep)}`);
          }
          requirements.push({ key, op: t.word, values });
        } else {
          throw new Error(`unexpected ${shown(t)} after \`${key}\``);
        }
      }
      const sep = next();
      if (!sep) break;
      if (sep.op !== ',') throw new Error(`unexpected ${shown(sep)}`);
    }
  } catch (e) {
    return { error: e.message };
  }
  return { requirements };
}

/** Whether `labels` (an object of strings, or undefined) meet every requirement. */
export function matches(requirements, labels) {
  const get = (k) => (labels && Object.prototype.hasOwnProperty.call(labels, k) ? labels[k] : undefined);
  return requirements.every(({ key, op, values }) => {
    const v = get(key);
    switch (op) {
      case '=':
        return v === values[0];
      case '!=':
        return v !== values[0];
      case 'in':
        return v !== undefined && values.includes(v);
      case 'notin':
        return v === undefined || !values.includes(v);
      case 'exists':
        return v !== undefined;
      case '!exists':
        return v === undefined;
      default:
        return false;
    }
  });
}
