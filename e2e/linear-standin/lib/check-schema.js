// Checks the SDL subset in lib/schema.graphql against the types @linear/sdk generates from
// Linear's real schema: every object type, field, argument, input field, enum and scalar must
// exist there with the same named type, the same list shape and the same nullability.
// `node lib/check-schema.js` prints the mismatches and exits 1 when there are any.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const graphql = require('graphql');
const { sdkTypes, toGraphQL } = require('./sdk-types');

const SCHEMA_FILE = path.join(__dirname, 'schema.graphql');
const BUILTIN = new Set(['String', 'Int', 'Float', 'Boolean', 'ID']);

function loadSchema(file = SCHEMA_FILE) {
  return graphql.buildSchema(fs.readFileSync(file, 'utf8'));
}

function capitalize(s) {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

// Returns a list of mismatch descriptions (empty when the subset agrees with the SDK).
function checkSchema(schema = loadSchema(), sdk = sdkTypes()) {
  const problems = [];
  const compare = (where, sdlType, sdkField) => {
    if (!sdkField) {
      problems.push(`${where}: not in @linear/sdk ${sdk.version}`);
      return;
    }
    const theirs = toGraphQL(sdkField.type);
    const ours = sdlType.toString();
    if (theirs !== ours) problems.push(`${where}: the subset says ${ours}, @linear/sdk ${sdk.version} says ${theirs}`);
  };

  for (const [name, type] of Object.entries(schema.getTypeMap())) {
    if (name.startsWith('__') || BUILTIN.has(name)) continue;
    if (graphql.isScalarType(type)) {
      if (!sdk.model.scalars.has(name)) problems.push(`scalar ${name}: not in @linear/sdk ${sdk.version}`);
      continue;
    }
    if (graphql.isEnumType(type)) {
      const theirs = sdk.model.enums.get(name);
      if (!theirs) {
        problems.push(`enum ${name}: not in @linear/sdk ${sdk.version}`);
        continue;
      }
      for (const v of type.getValues()) {
        if (!theirs.includes(v.name)) problems.push(`enum ${name}.${v.name}: not in @linear/sdk ${sdk.version} (${theirs.join(', ')})`);
      }
      continue;
    }
    if (graphql.isObjectType(type) || graphql.isInputObjectType(type)) {
      const kind = graphql.isObjectType(type) ? 'type' : 'input';
      const theirFields = sdk.fields(name);
      if (!theirFields) {
        problems.push(`${kind} ${name}: not in @linear/sdk ${sdk.version}`);
        continue;
      }
      const ourFields = type.getFields();
      for (const [fieldName, field] of Object.entries(ourFields)) {
        compare(`${kind} ${name}.${fieldName}`, field.type, theirFields.get(fieldName));
        if (kind !== 'type') continue;
        const argsName = `${name}${capitalize(fieldName)}Args`;
        const theirArgs = sdk.fields(argsName);
        if (field.args.length && !theirArgs) {
          problems.push(`type ${name}.${fieldName}: has arguments, but @linear/sdk ${sdk.version} has no ${argsName}`);
          continue;
        }
        for (const arg of field.args) compare(`type ${name}.${fieldName}(${arg.name})`, arg.type, theirArgs.get(arg.name));
        if (theirArgs) {
          for (const [argName, arg] of theirArgs) {
            if (!arg.type.nullable && !field.args.some((a) => a.name === argName)) {
              problems.push(`type ${name}.${fieldName}(${argName}): required by @linear/sdk ${sdk.version} but missing from the subset`);
            }
          }
        }
      }
      if (kind === 'input') {
        for (const [fieldName, f] of theirFields) {
          if (!f.type.nullable && !ourFields[fieldName]) problems.push(`input ${name}.${fieldName}: required by @linear/sdk ${sdk.version} but missing from the subset`);
        }
      }
      continue;
    }
    problems.push(`${name}: a kind of type the check does not handle`);
  }
  return problems;
}

module.exports = { checkSchema, loadSchema, SCHEMA_FILE };

if (require.main === module) {
  const file = process.argv[2] || SCHEMA_FILE;
  const problems = checkSchema(loadSchema(file));
  if (problems.length) {
    process.stderr.write(`${file} disagrees with @linear/sdk:\n${problems.map((p) => `  ${p}`).join('\n')}\n`);
    process.exit(1);
  }
  process.stderr.write(`${file} agrees with @linear/sdk ${sdkTypes().version}\n`);
}
