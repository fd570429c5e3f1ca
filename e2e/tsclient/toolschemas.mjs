// toolschemas.mjs checks a tools/list result the way the TypeScript MCP
// SDK clients receive it: TOOLS_FILE holds the result's JSON, MCP_SDK_DIR
// the folder whose node_modules hold both SDKs. For the v1 client
// (@modelcontextprotocol/sdk) and the v2 one (@modelcontextprotocol/client)
// it parses the result with the SDK's own ListToolsResult schema, as
// client.listTools() does, and compiles each tool's input and output
// schema with the SDK's default JSON Schema validator (Ajv), as the v1
// client does for output schemas when it lists tools. It prints one line
// per SDK and exits 1 on the first schema an SDK refuses.

import * as fs from 'node:fs';
import * as path from 'node:path';
import { createRequire } from 'node:module';
import { helpers } from './sdk.mjs';

const { fail, env } = helpers('toolschemas');
const require = createRequire(path.join(path.resolve(env('MCP_SDK_DIR')), 'package.json'));
const result = JSON.parse(fs.readFileSync(env('TOOLS_FILE'), 'utf8'));

const v1types = require('@modelcontextprotocol/sdk/types.js');
const v1ajv = require('@modelcontextprotocol/sdk/validation/ajv');
const v2 = await import(require.resolve('@modelcontextprotocol/client'));
const v2ajv = await import(require.resolve('@modelcontextprotocol/client/validators/ajv'));

const sdks = [
  { name: 'v1', schema: v1types.ListToolsResultSchema, validator: new v1ajv.AjvJsonSchemaValidator() },
  { name: 'v2', schema: v2.specTypeSchemas.ListToolsResult, validator: new v2ajv.AjvJsonSchemaValidator() },
];

for (const sdk of sdks) {
  const parsed = sdk.schema.safeParse(result);
  if (!parsed.success) {
    fail(`${sdk.name}: the SDK refuses the tools/list result: ${parsed.error.message}`);
  }
  let schemas = 0;
  for (const tool of parsed.data.tools) {
    for (const kind of ['inputSchema', 'outputSchema']) {
      if (!tool[kind]) continue;
      try {
        sdk.validator.getValidator(tool[kind]);
      } catch (e) {
        fail(`${sdk.name}: ${tool.name}'s ${kind} does not compile: ${e.message}`);
      }
      schemas++;
    }
  }
  process.stdout.write(`${sdk.name}: ${parsed.data.tools.length} tools, ${schemas} schemas accepted\n`);
}
