// A LangChain.js tool that runs an agent's code in a fresh smolbox sandbox through the API, for
// any LangChain agent or model that calls tools (bindTools, createAgent...):
//
//   import { Client } from 'smolbox';
//   import { smolboxRunCodeTool } from 'smolbox/langchain';
//   const runCode = smolboxRunCodeTool(new Client(), { limits: { timeout_ms: 10000 } });
//   const text = await runCode.invoke({ language: 'python', code: 'print(6 * 7)' });
//
// Each call is one POST /v1/run: no network, the server's defaults and the given limits. What
// the code did comes back as text for the model, with how it ended; a limit it hit is named.
import { tool } from '@langchain/core/tools';

const INTERPRETERS = {
  python: ['/usr/bin/python3', '-c'],
  javascript: ['/usr/bin/node', '-e'],
  shell: ['/bin/sh', '-c'],
};

// What ended a workload, in the words of the limit to raise (as smolbox mcp says it).
const LIMIT_OF_STATUS = {
  timeout: 'the wall-time limit (limits.timeout_ms)',
  cpu_limit: 'the CPU-time limit (limits.cpu_ms)',
  memory_limit: 'the memory limit (limits.memory_mib)',
  output_limit: 'the output limit (limits.output_bytes)',
  violation: "the sandbox's system call policy",
};

// The result as a model reads it: how it ended, then its output.
export function describeResult(result) {
  let ended;
  if (result.status === 'exited') ended = `exit code ${result.exit_code}`;
  else if (LIMIT_OF_STATUS[result.status]) ended = `${result.status}: ${LIMIT_OF_STATUS[result.status]} ended the code`;
  else ended = `${result.status}${result.error ? `: ${result.error}` : ''}`;
  let text = `${ended}\n`;
  if (result.stdout) text += `--- stdout ---\n${result.stdout}`;
  if (result.stderr) text += `--- stderr ---\n${result.stderr}`;
  return text;
}

export function smolboxRunCodeTool(client, { limits, name = 'smolbox_run_code', backend } = {}) {
  return tool(
    async ({ language = 'python', code, stdin }) => {
      const spec = { argv: [...INTERPRETERS[language], code] };
      if (stdin !== undefined) spec.stdin = stdin;
      if (limits) spec.limits = limits;
      if (backend) spec.backend = backend;
      return describeResult(await client.run(spec));
    },
    {
      name,
      description: 'Runs code in a fresh, isolated sandbox with no network, and returns how it ended and its output.',
      schema: {
        type: 'object',
        properties: {
          language: { type: 'string', enum: Object.keys(INTERPRETERS), description: 'default python' },
          code: { type: 'string', description: 'the program' },
          stdin: { type: 'string' },
        },
        required: ['code'],
        additionalProperties: false,
      },
    },
  );
}
