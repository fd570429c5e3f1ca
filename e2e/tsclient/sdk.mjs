// sdk.mjs loads the TypeScript MCP SDK client the e2e scripts drive, the
// same way for each of them: MCP_SDK names the major version (v1: the
// @modelcontextprotocol/sdk package, v2: @modelcontextprotocol/client),
// MCP_SDK_DIR the folder whose node_modules hold it.

import * as fs from 'node:fs';
import * as path from 'node:path';
import { createRequire } from 'node:module';

// helpers returns fail, which writes "script: msg" on stderr and exits 1,
// and env, which returns an environment variable or fails when it is unset.
export function helpers(script) {
  const fail = (msg) => {
    process.stderr.write(`${script}: ${msg}\n`);
    process.exit(1);
  };
  const env = (name) => process.env[name] || fail(`${name} is not set`);
  return { fail, env };
}

// loadSDK returns which (v1 or v2), pkg and sdkVersion (the package and
// its version, for the script's first line), the SDK's Client,
// StreamableHTTPClientTransport and UnauthorizedError, and onRequest and
// onNotification: onRequest(client, method, handler) answers the server's
// requests of method (elicitation/create, sampling/createMessage) with
// handler(request), onNotification(client, method, handler) calls
// handler(notification) for each notification of method
// (notifications/tools/list_changed, notifications/resources/updated,
// notifications/elicitation/complete),
// whichever the SDK (v1 registers a handler by the method's schema, v2 by
// its name).
export function loadSDK(script) {
  const { fail, env } = helpers(script);
  const require = createRequire(path.join(path.resolve(env('MCP_SDK_DIR')), 'package.json'));
  const which = env('MCP_SDK');
  let sdk, pkg, entry, schemaOf;
  if (which === 'v1') {
    pkg = '@modelcontextprotocol/sdk';
    entry = '@modelcontextprotocol/sdk/client/index.js';
    sdk = {
      ...require(entry),
      ...require('@modelcontextprotocol/sdk/client/streamableHttp.js'),
      ...require('@modelcontextprotocol/sdk/client/auth.js'),
    };
    const types = require('@modelcontextprotocol/sdk/types.js');
    const schemas = {
      'elicitation/create': types.ElicitRequestSchema,
      'sampling/createMessage': types.CreateMessageRequestSchema,
      'notifications/tools/list_changed': types.ToolListChangedNotificationSchema,
      'notifications/resources/updated': types.ResourceUpdatedNotificationSchema,
      'notifications/elicitation/complete': types.ElicitationCompleteNotificationSchema,
    };
    schemaOf = (method) => schemas[method] ?? fail(`no schema known for ${method}`);
  } else if (which === 'v2') {
    pkg = entry = '@modelcontextprotocol/client';
    sdk = require(pkg);
  } else {
    fail(`MCP_SDK=${which}: want v1 or v2`);
  }
  // The package's own package.json: walk up from its entry point.
  let sdkVersion = 'unknown';
  for (let dir = path.dirname(require.resolve(entry)); dir !== path.dirname(dir); dir = path.dirname(dir)) {
    const f = path.join(dir, 'package.json');
    if (fs.existsSync(f)) {
      const p = JSON.parse(fs.readFileSync(f, 'utf8'));
      if (p.name === pkg) {
        sdkVersion = p.version;
        break;
      }
    }
  }
  const { Client, StreamableHTTPClientTransport, UnauthorizedError } = sdk;
  const key = schemaOf ?? ((method) => method);
  const onRequest = (client, method, handler) => client.setRequestHandler(key(method), handler);
  const onNotification = (client, method, handler) => client.setNotificationHandler(key(method), handler);
  return { which, pkg, sdkVersion, Client, StreamableHTTPClientTransport, UnauthorizedError, onRequest, onNotification };
}
