// idp.mjs runs a real OpenID provider (oidc-provider, OpenID Certified) on
// 127.0.0.1 for Portcullis's end-to-end tests. It is a test fixture, never a
// production authorization server: dev interactions accept any user name
// (any password), and everything is plain http.
//
// Usage (Node >= 22; scripts/install-node-tools.sh installs the deps):
//
//   IDP_DEPS_DIR=.cache/node-tools/idp node e2e/idp/idp.mjs [--profile P] [--port N] [--keys FILE] [--check]
//
// Flags and environment (a flag wins over its variable):
//   --profile P / IDP_PROFILE    default, entra, okta, google or keycloak
//                                (default: default; see "Profiles" below)
//   --port N / IDP_PORT          port on 127.0.0.1 (default 0: any free port)
//   --keys FILE / IDP_KEYS_FILE  private JWKS file; made on first start and
//                                reused after, so restarts keep the same kids
//                                (default: fresh keys in memory)
//   --check                      start, fetch the own discovery document and
//                                exit 0 (the install script's smoke test)
//   IDP_DEPS_DIR                 folder whose node_modules holds oidc-provider
//                                (default: resolve it next to this file)
//   IDP_ACCESS_TOKEN_TTL         JWT/opaque access token lifetime in seconds (default 3600)
//   IDP_CLIENTS                  JSON array of extra client metadata
//                                (oidc-provider's, as in RFC 7591); an entry
//                                whose client_id matches a built-in client
//                                replaces it
//   IDP_RP_REDIRECT_URIS         redirect URIs (space- or comma-separated) of
//                                the relying-party client; without it there
//                                is none (any profile)
//   IDP_RP_CLIENT_ID             its client_id (default portcullis-rp)
//   IDP_RP_CLIENT_SECRET         its secret (default <client_id>-secret)
//   IDP_RP_AUTH_METHOD           client_secret_basic (default) or
//                                client_secret_post; the token endpoint takes
//                                the secret either way
//   IDP_INITIAL_ACCESS_TOKEN     okta and keycloak: the bearer token dynamic
//                                client registration wants (default
//                                <profile>-initial-access-token)
//   IDP_IDJAG_CLIENTS            entra: JSON object mapping an authorization
//                                server's issuer (an ID-JAG's audience) to the
//                                client_id the requesting client has there,
//                                which the ID-JAG names (see "Grants for
//                                upstreams" below)
//   IDP_IDJAG_TRUSTED_ISSUER     default: the issuer (an entra-profile IdP)
//                                whose ID-JAGs the jwt-bearer grant accepts
//   IDP_REFRESH_TOKENS=rotate    default: every code grant of a client that
//                                may use refresh_token gets a refresh token
//                                (no offline_access needed, as a SaaS's own
//                                authorization server does), and each refresh
//                                rotates it (the one used is spent)
//   IDP_LOG_TOKENS=1             write every token the token endpoint issues
//                                to stderr, one line each, with the grant:
//                                idp: issued {"grant_type":…,"access_token":…,"id_token":…,"refresh_token":…}
//                                (for tests that look for them where they
//                                must not be)
//
// When listening it prints one JSON line on stdout:
//   {"issuer":"http://127.0.0.1:PORT","profile":"default"}
// Everything else (oidc-provider's warnings and notices, request errors)
// goes to stderr.
//
// The relying-party client (IDP_RP_*) is a confidential client as a
// customer registers Portcullis in authorization-server mode at its IdP:
// grant_types authorization_code and refresh_token, response_types code,
// the redirect URIs given (e.g. http://127.0.0.1:PORT/oauth/callback,
// matched exactly). IDP_CLIENTS can register more such clients, e.g.
//   [{"client_id":"rp","client_secret":"s","redirect_uris":["http://127.0.0.1:8080/oauth/callback"],
//     "grant_types":["authorization_code","refresh_token"],"response_types":["code"],
//     "token_endpoint_auth_method":"client_secret_post"}]
//
// Users: any login name signs in (dev interactions: a login form, then a
// consent form) and is the subject (sub). A name starting with "admin" is
// in the groups users and admins, any other only in users.
//
// ---------------------------------------------------------------------
// Profile "default": the provider the resource-server tests use.
// ---------------------------------------------------------------------
// Built-in clients (all confidential, client_secret_basic or _post):
//   portcullis-e2e           secret portcullis-e2e-secret           client_credentials; scope mcp:tools mcp:admin weather:read
//   portcullis-e2e-limited   secret portcullis-e2e-limited-secret   client_credentials; scope mcp:tools
//   portcullis-e2e-es256     secret portcullis-e2e-es256-secret     client_credentials; all scopes; JWTs signed ES256
//   portcullis-e2e-opaque    secret portcullis-e2e-opaque-secret    client_credentials; all scopes; opaque tokens (introspection)
//   portcullis-introspector  secret portcullis-introspector-secret  no grants; calls introspection and revocation
// Any confidential client may introspect any token (a public client only its
// own); a token's own client and portcullis-introspector may revoke it.
// Dynamic client registration (POST /reg) is open; PKCE (S256) is required
// for every authorization code request.
//
// Tokens:
//   - A request with resource=<any http(s) URL> (RFC 8707) gets an access
//     token for that resource server: a JWT (header typ "at+jwt", RS256 by
//     default) whose aud is the resource, or an opaque token for
//     portcullis-e2e-opaque. Resource-server scopes are mcp:tools,
//     mcp:admin and weather:read, limited to the client's registered scope.
//   - A request without scope gets the client's default: every
//     resource-server scope the client may have (client_credentials and the
//     authorization endpoint).
//   - A request without resource gets an opaque token (no audience).
//   - Extra claims: a user's token (authorization code) has
//     groups ["users"], plus "admins" when the login name starts with
//     "admin"; a client_credentials token of portcullis-e2e has roles
//     ["mcp-admin"]; a client_credentials token's introspection answer
//     has sub = client_id, as its JWT has.
//   - ID tokens (scope openid) have sub, and name and email
//     (<login>@example.test) only as oidc-provider releases them.
//
// ---------------------------------------------------------------------
// Profiles "entra", "okta", "google", "keycloak": the identity providers
// enterprises run, as an OIDC relying party (Portcullis in
// authorization-server mode) sees them.
// ---------------------------------------------------------------------
// Common to the four: no built-in clients (only IDP_RP_* and
// IDP_CLIENTS) and, but for entra, no client_credentials; scopes openid, email, profile,
// offline_access; PKCE S256 is checked when sent (a wrong code_verifier is
// invalid_grant) but not required; every claim below is in the ID token
// whatever the scope (conformIdTokenClaims off); email is the login name
// when it has a domain ("alice@example.com"), else <login>@example.test.
// A refresh token needs offline access (the offline_access scope; oidc-
// provider's prompt=consent for it is added, so the consent form shows
// again), except where said.
//
// entra (Microsoft Entra ID, v2 endpoints):
//   - No dynamic client registration: discovery has no
//     registration_endpoint, POST /reg is 404.
//   - Discovery omits code_challenge_methods_supported (S256 works) and
//     authorization_response_iss_parameter_supported; the authorization
//     response has no iss (RFC 9207).
//   - resource (RFC 8707): any value but the app's identifier URI
//     api://<client_id> is refused, at the authorization endpoint (a
//     redirect with error=invalid_target) and at the token endpoint (400
//     invalid_target), the description starting "AADSTS9010010:".
//   - Access tokens are the app's own: JWTs (RS256) with header typ "JWT"
//     (not at+jwt), aud = the client_id (the app id), azp = the client_id,
//     ver "2.0", no scope or client_id claim, and groups, roles, tid, oid
//     as in the ID token; they are no good at userinfo.
//   - The app's own scopes, api://<client_id>/NAME (e.g. .../.default,
//     .../mcp.access), are granted and named in the access token's scp
//     ("mcp.access"; .default names none); other unknown scopes are
//     dropped, as oidc-provider does.
//   - ID token claims: groups = object ids (GUID-like, see objectId: the
//     first 16 bytes of sha256("portcullis-e2e-idp:" + group) as
//     8-4-4-4-12 hex) of users (and admins); roles ["MCP.User"] (plus
//     "MCP.Admin" for admins: app roles); tid 72f988bf-0000-4000-8000-00000000e2e0;
//     oid = objectId("user:" + login); preferred_username = email.
//   - No introspection, no revocation.
//   - client_credentials for a client that registers the grant: a token
//     for the app the scope names (api://APP/.default: aud APP), no user.
//   - The resource of a request without one is the app its scope names
//     (api://APP/...), else the client's own, api://<client_id>; a token
//     is for APP (aud APP, scp from api://APP/ scopes).
//
// okta (an Okta org authorization server):
//   - Registration is advertised but wants IDP_INITIAL_ACCESS_TOKEN as a
//     bearer token (Okta: an admin API token); anonymous POST /reg is 401
//     invalid_token.
//   - resource is ignored (as Okta ignores unknown parameters): no error,
//     the token names no resource. Access tokens are opaque.
//   - ID token claims: groups ["Everyone", "users"(, "admins")],
//     email_verified true, preferred_username = email.
//   - Introspection and revocation.
//
// google (Google's OpenID Connect):
//   - No dynamic client registration (no registration_endpoint, POST /reg
//     404); no iss in the authorization response.
//   - resource is ignored. Access tokens are opaque.
//   - Offline access is access_type=offline; an authorization request
//     with the offline_access scope is refused with a 400 error page
//     (invalid_scope, "Some requested scopes were invalid. {valid=[…],
//     invalid=[offline_access]}"), not redirected to the client.
//   - ID token claims: email_verified true, and hd (the hosted domain) =
//     the login name's domain ("alice@example.com" -> "example.com"); a
//     login without a domain has no hd. No groups, no roles.
//   - Revocation, no introspection.
//
// keycloak (a Keycloak realm):
//   - Registration is advertised; anonymous POST /reg is refused by the
//     default "Trusted Hosts" policy: 403 insufficient_scope. With
//     IDP_INITIAL_ACCESS_TOKEN as a bearer token it works (201).
//   - resource is ignored. Access tokens are opaque (not Keycloak's JWTs).
//   - Every code flow gets a refresh token (no offline access needed).
//   - ID token claims: realm_access.roles ["default-roles-portcullis",
//     "offline_access", "users"(, "admins")] (as with the realm roles
//     mapper's "add to ID token" on), no top-level groups or roles;
//     email_verified true, preferred_username = the login name.
//   - Introspection and revocation.
//
// ---------------------------------------------------------------------
// Grants for upstreams (what Portcullis asks for a token for each caller)
// ---------------------------------------------------------------------
// entra, for clients that register the grant types:
//   - On-behalf-of (Entra's RFC 7523 jwt-bearer grant,
//     urn:ietf:params:oauth:grant-type:jwt-bearer): assertion = an access
//     token this IdP issued (RS256, unexpired) whose aud is the requesting
//     client, requested_token_use=on_behalf_of, scope api://APP/.default:
//     a JWT access token for the same user (sub) with aud APP. A bad
//     assertion is invalid_grant ("AADSTS50013: …"), a missing
//     requested_token_use invalid_request. stderr gets
//     "idp: on-behalf-of for <sub>".
//   - Identity Assertion JWT Authorization Grants (RFC 8693 token
//     exchange, requested_token_type urn:ietf:params:oauth:token-type:id-jag,
//     draft-ietf-oauth-identity-assertion-authz-grant): subject_token = an
//     ID token (subject_token_type …:id_token) or an access token
//     (…:access_token) this IdP issued to the requesting client (its aud);
//     audience = an issuer of IDP_IDJAG_CLIENTS, resource = any URL. The
//     answer's access_token is an ID-JAG (typ oauth-id-jag+jwt, RS256,
//     5 minutes): iss, sub, aud = audience, client_id =
//     IDP_IDJAG_CLIENTS[audience], jti, iat, exp, resource, scope;
//     issued_token_type …:id-jag, token_type N_A. stderr gets
//     "idp: id-jag for <sub> from <id_token|access_token>".
// default, with IDP_IDJAG_TRUSTED_ISSUER: the jwt-bearer grant with an
//   ID-JAG that issuer signed (its /jwks), typ oauth-id-jag+jwt, aud this
//   issuer, client_id the requesting client, unexpired, each jti once: a
//   JWT access token for its sub with aud its resource and the
//   resource-server scopes of its scope the client may have.
//
// The JWKS publishes an RS256 and an ES256 key; ID tokens are RS256.

import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';
import { fileURLToPath, pathToFileURL } from 'node:url';

const HOST = '127.0.0.1';

// oidc-provider prints notices with console.info; stdout is for the issuer
// line only.
console.info = (...a) => console.error(...a);
const RS_SCOPES = ['mcp:tools', 'mcp:admin', 'weather:read'];
const ALL = RS_SCOPES.join(' ');

const { values: args } = parseArgs({
  options: {
    port: { type: 'string' },
    keys: { type: 'string' },
    check: { type: 'boolean', default: false },
    profile: { type: 'string' },
  },
  strict: true,
});

function die(msg) {
  process.stderr.write(`idp: ${msg}\n`);
  process.exit(1);
}

// loadProvider imports oidc-provider from IDP_DEPS_DIR (the install
// script's cache folder) or, without it, from next to this file.
async function loadProvider() {
  const depsDir = process.env.IDP_DEPS_DIR;
  if (!depsDir) {
    return import('oidc-provider');
  }
  let entry;
  try {
    entry = createRequire(path.join(path.resolve(depsDir), 'package.json')).resolve('oidc-provider');
  } catch (err) {
    die(`oidc-provider is not installed in ${depsDir} (${err.message}): run \`make tools\` (scripts/install-node-tools.sh)`);
  }
  return import(pathToFileURL(entry).href);
}

// thumbprint is the RFC 7638 JWK thumbprint, used as kid.
function thumbprint(jwk) {
  const members = jwk.kty === 'RSA' ? { e: jwk.e, kty: jwk.kty, n: jwk.n } : { crv: jwk.crv, kty: jwk.kty, x: jwk.x, y: jwk.y };
  return crypto.createHash('sha256').update(JSON.stringify(members)).digest('base64url');
}

function makeKeys() {
  const rsa = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' });
  const ec = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'jwk' });
  // RS256 first: oidc-provider signs with the first key matching the alg.
  return {
    keys: [
      { ...rsa, kid: thumbprint(rsa), use: 'sig', alg: 'RS256' },
      { ...ec, kid: thumbprint(ec), use: 'sig', alg: 'ES256' },
    ],
  };
}

// loadKeys reads the private JWKS from file, making and saving it first
// when the file does not exist yet.
function loadKeys(file) {
  if (!file) return makeKeys();
  try {
    const jwks = JSON.parse(fs.readFileSync(file, 'utf8'));
    if (!Array.isArray(jwks.keys) || jwks.keys.length === 0) die(`${file}: no keys`);
    return jwks;
  } catch (err) {
    if (err.code !== 'ENOENT') die(`${file}: ${err.message}`);
  }
  const jwks = makeKeys();
  fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, JSON.stringify(jwks, null, 2), { mode: 0o600 });
  fs.renameSync(tmp, file);
  return jwks;
}

function builtInClients() {
  const cc = (client_id, scope, extra = {}) => ({
    client_id,
    client_secret: `${client_id}-secret`,
    grant_types: ['client_credentials'],
    response_types: [],
    redirect_uris: [],
    token_endpoint_auth_method: 'client_secret_basic',
    scope,
    ...extra,
  });
  return [
    cc('portcullis-e2e', ALL),
    cc('portcullis-e2e-limited', 'mcp:tools'),
    cc('portcullis-e2e-es256', ALL),
    cc('portcullis-e2e-opaque', ALL),
    cc('portcullis-introspector', undefined, { grant_types: [] }),
  ];
}

function clients() {
  const byId = new Map((profile === 'default' ? builtInClients() : []).map((c) => [c.client_id, c]));
  const rp = rpClient();
  if (rp) byId.set(rp.client_id, rp);
  if (process.env.IDP_CLIENTS) {
    let extra;
    try {
      extra = JSON.parse(process.env.IDP_CLIENTS);
    } catch (err) {
      die(`IDP_CLIENTS: ${err.message}`);
    }
    if (!Array.isArray(extra)) die('IDP_CLIENTS: want a JSON array of client metadata');
    for (const c of extra) byId.set(c.client_id, c);
  }
  return [...byId.values()];
}

// clientScopes returns the resource-server scopes client may have.
function clientScopes(client) {
  if (!client?.scope) return RS_SCOPES;
  const allowed = new Set(client.scope.split(' '));
  return RS_SCOPES.filter((s) => allowed.has(s));
}

// The IdP profiles (see the header comment).
const PROFILES = ['default', 'entra', 'okta', 'google', 'keycloak'];
const profile = args.profile ?? process.env.IDP_PROFILE ?? 'default';
if (!PROFILES.includes(profile)) die(`unknown profile ${JSON.stringify(profile)}: want one of ${PROFILES.join(', ')}`);

// The tenant of the entra profile (a fixed GUID, as Entra's tid).
const ENTRA_TENANT = '72f988bf-0000-4000-8000-00000000e2e0';

// objectId is a stable GUID-like object id for a name (entra groups and
// users): the first 16 bytes of sha256("portcullis-e2e-idp:" + name) as
// 8-4-4-4-12 lowercase hex.
function objectId(name) {
  const h = crypto.createHash('sha256').update(`portcullis-e2e-idp:${name}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

// accountClaims returns the claims of the user who signed in as login
// (any name) in this profile.
function accountClaims(login) {
  if (profile === 'default') {
    return { sub: login, name: login, email: `${login}@example.test` };
  }
  const groups = login.startsWith('admin') ? ['users', 'admins'] : ['users'];
  const at = login.lastIndexOf('@');
  const domain = at > 0 && at < login.length - 1 ? login.slice(at + 1) : undefined;
  const email = domain ? login : `${login}@example.test`;
  const base = { sub: login, name: login, email };
  switch (profile) {
    case 'entra':
      return {
        ...base,
        preferred_username: email,
        groups: groups.map(objectId),
        roles: groups.includes('admins') ? ['MCP.User', 'MCP.Admin'] : ['MCP.User'],
        tid: ENTRA_TENANT,
        oid: objectId(`user:${login}`),
      };
    case 'okta':
      return { ...base, preferred_username: email, email_verified: true, groups: ['Everyone', ...groups] };
    case 'google':
      return { ...base, email_verified: true, ...(domain ? { hd: domain } : {}) };
    case 'keycloak':
      return {
        ...base,
        preferred_username: login,
        email_verified: true,
        realm_access: { roles: ['default-roles-portcullis', 'offline_access', ...groups] },
      };
  }
  return base;
}

// rpClient is the confidential client of a relying party (Portcullis in
// authorization-server mode) from IDP_RP_*, or undefined without
// IDP_RP_REDIRECT_URIS.
function rpClient() {
  const uris = (process.env.IDP_RP_REDIRECT_URIS || '').split(/[\s,]+/).filter(Boolean);
  if (uris.length === 0) return undefined;
  const client_id = process.env.IDP_RP_CLIENT_ID || 'portcullis-rp';
  const method = process.env.IDP_RP_AUTH_METHOD || 'client_secret_basic';
  if (!['client_secret_basic', 'client_secret_post'].includes(method)) {
    die(`IDP_RP_AUTH_METHOD=${method}: want client_secret_basic or client_secret_post`);
  }
  return {
    client_id,
    client_secret: process.env.IDP_RP_CLIENT_SECRET || `${client_id}-secret`,
    client_name: 'Portcullis',
    redirect_uris: uris,
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: method,
  };
}

// The initial access token the okta and keycloak profiles require for
// dynamic client registration.
const initialAccessToken = process.env.IDP_INITIAL_ACCESS_TOKEN || `${profile}-initial-access-token`;

const accessTokenTTL = Number.parseInt(process.env.IDP_ACCESS_TOKEN_TTL || '3600', 10);
if (!(accessTokenTTL > 0)) die(`IDP_ACCESS_TOKEN_TTL=${process.env.IDP_ACCESS_TOKEN_TTL}: want a positive number of seconds`);

const refreshTokens = process.env.IDP_REFRESH_TOKENS;
if (refreshTokens !== undefined && refreshTokens !== 'rotate') die(`IDP_REFRESH_TOKENS=${refreshTokens}: want rotate`);

const port = Number.parseInt(args.port ?? process.env.IDP_PORT ?? '0', 10);
if (!(port >= 0 && port < 65536)) die(`bad port ${args.port ?? process.env.IDP_PORT}`);

const { default: Provider, errors } = await loadProvider();
const jwks = loadKeys(args.keys ?? process.env.IDP_KEYS_FILE);

// The issuer needs the port, so listen first and attach the provider after.
const server = http.createServer();
await new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(port, HOST, resolve);
});
const issuer = `http://${HOST}:${server.address().port}`;

// defaultConfig is the default profile's configuration.
const defaultConfig = () => ({
  clients: clients(),
  jwks,
  // Listing the resource-server scopes here makes oidc-provider enforce each
  // client's registered scope as an allow-list (invalid_scope otherwise).
  scopes: ['openid', 'offline_access', ...RS_SCOPES],
  claims: { openid: ['sub'], profile: ['name'], email: ['email'] },
  cookies: { keys: ['portcullis-e2e-idp-cookie-key'] },
  pkce: { required: () => true },
  clientDefaults: { id_token_signed_response_alg: 'RS256' },
  enabledJWA: {
    idTokenSigningAlgValues: ['RS256', 'ES256'],
    requestObjectSigningAlgValues: ['RS256', 'ES256'],
  },
  ttl: {
    AccessToken: (ctx, token) => token.resourceServer?.accessTokenTTL ?? accessTokenTTL,
    ClientCredentials: (ctx, token) => token.resourceServer?.accessTokenTTL ?? accessTokenTTL,
  },
  async findAccount(ctx, sub) {
    return { accountId: sub, async claims() { return accountClaims(sub); } };
  },
  ...(refreshTokens === 'rotate' ? {
    async issueRefreshToken(ctx, client) {
      return client.grantTypeAllowed('refresh_token');
    },
    rotateRefreshToken: () => true,
  } : {}),
  async extraTokenClaims(ctx, token) {
    if (token.accountId) {
      return { groups: token.accountId.startsWith('admin') ? ['users', 'admins'] : ['users'] };
    }
    // A client_credentials token's subject is its client (RFC 9068
    // section 2.2), as in this provider's JWT access tokens; its
    // introspection answer names no sub for a token without an account,
    // and Portcullis refuses an introspected token without one.
    const extra = { sub: token.clientId };
    if (token.clientId === 'portcullis-e2e') {
      extra.roles = ['mcp-admin'];
    }
    return extra;
  },
  features: {
    devInteractions: { enabled: true },
    clientCredentials: { enabled: true },
    // Any confidential client may introspect any token; a public client
    // only its own.
    introspection: {
      enabled: true,
      async allowedPolicy(ctx, client, token) {
        return client.clientAuthMethod !== 'none' || token.clientId === client.clientId;
      },
    },
    // A token's own client and portcullis-introspector may revoke it.
    revocation: {
      enabled: true,
      async allowedPolicy(ctx, client, token) {
        return token.clientId === client.clientId || client.clientId === 'portcullis-introspector';
      },
    },
    registration: { enabled: true },
    resourceIndicators: {
      enabled: true,
      // No resource parameter: no audience, so an opaque token.
      async defaultResource() {
        return undefined;
      },
      // Keep the resource the grant was made for when the token request
      // names none (the connector flow always names it anyway).
      async useGrantedResource() {
        return true;
      },
      async getResourceServerInfo(ctx, resource, client) {
        const url = URL.parse(resource);
        if (!url || !['http:', 'https:'].includes(url.protocol)) {
          throw new errors.InvalidTarget('resource must be an http(s) URL');
        }
        const scopes = clientScopes(client);
        // A request without scope gets the client's default scope.
        const { route, params } = ctx.oidc;
        if (!params.scope && (route === 'authorization' || (route === 'token' && params.grant_type === 'client_credentials'))) {
          params.scope = scopes.join(' ');
        }
        const info = {
          scope: scopes.join(' '),
          audience: resource,
          accessTokenTTL,
          accessTokenFormat: client?.clientId === 'portcullis-e2e-opaque' ? 'opaque' : 'jwt',
        };
        if (info.accessTokenFormat === 'jwt') {
          info.jwt = { sign: { alg: client?.clientId === 'portcullis-e2e-es256' ? 'ES256' : 'RS256' } };
        }
        return info;
      },
    },
  },
});

// entraResource is the client's own app identifier URI, api://<client_id>:
// the resource of its tokens unless a scope names another app.
const entraResource = (client) => `api://${client?.clientId}`;

// entraRequestScope is the scope of the request, or of the code or
// refresh token being redeemed.
function entraRequestScope(ctx) {
  const { params, entities } = ctx.oidc;
  return String(params.scope ?? entities.AuthorizationCode?.scope ?? entities.RefreshToken?.scope ?? '');
}

// entraScopedApp is the identifier URI api://APP of the first app a scope
// of the request names (api://APP/NAME), or undefined.
function entraScopedApp(ctx) {
  for (const s of entraRequestScope(ctx).split(' ')) {
    const m = /^(api:\/\/[^/]+)\/./.exec(s);
    if (m) return m[1];
  }
  return undefined;
}

// entraAppScopes returns the scopes of the app resource (api://APP/NAME,
// e.g. api://APP/.default) among those of the request, or of the code or
// refresh token being redeemed.
function entraAppScopes(ctx, resource) {
  const prefix = `${resource}/`;
  return entraRequestScope(ctx).split(' ').filter((s) => s.startsWith(prefix) && s.length > prefix.length);
}

// profileConfig is the configuration of the entra, okta, google and
// keycloak profiles: only a relying party's code flow (no
// client_credentials, no built-in clients), every account claim of the
// profile in the ID token (conformIdTokenClaims off), PKCE checked when
// sent but not required.
function profileConfig() {
  const config = {
    clients: clients(),
    jwks,
    scopes: ['openid', 'offline_access'],
    // Under openid, the profile's extra claims are in every ID token; a
    // claim the account lacks (hd without a domain) is left out.
    claims: {
      openid: ['sub', 'groups', 'roles', 'tid', 'oid', 'hd', 'realm_access'],
      profile: ['name', 'preferred_username'],
      email: ['email', 'email_verified'],
    },
    conformIdTokenClaims: false,
    cookies: { keys: ['portcullis-e2e-idp-cookie-key'] },
    pkce: { required: () => false },
    clientDefaults: { id_token_signed_response_alg: 'RS256' },
    enabledJWA: {
      idTokenSigningAlgValues: ['RS256', 'ES256'],
      requestObjectSigningAlgValues: ['RS256', 'ES256'],
    },
    ttl: { AccessToken: accessTokenTTL },
    async findAccount(ctx, sub) {
      return { accountId: sub, async claims() { return accountClaims(sub); } };
    },
    // Refresh tokens: keycloak gives one with every code; the others only
    // for offline access (the offline_access scope; google:
    // access_type=offline, see the middleware).
    async issueRefreshToken(ctx, client, code) {
      return client.grantTypeAllowed('refresh_token') && (profile === 'keycloak' || code.scopes.has('offline_access'));
    },
    features: {
      devInteractions: { enabled: true },
      introspection: { enabled: profile === 'okta' || profile === 'keycloak' },
      revocation: { enabled: profile !== 'entra' },
      // okta and keycloak advertise registration but want an initial
      // access token (keycloak's anonymous refusal: see the middleware);
      // entra and google have none (POST /reg is 404).
      registration: profile === 'okta' || profile === 'keycloak'
        ? { enabled: true, initialAccessToken }
        : { enabled: false },
      // okta, google, keycloak: the resource feature is off, so a resource
      // parameter is one more unknown parameter and ignored; access
      // tokens are opaque.
      resourceIndicators: { enabled: false },
    },
  };
  if (profile === 'entra') {
    // Access tokens are JWTs for the app itself (typ "JWT", aud the
    // client_id, groups/roles/tid/oid as in the ID token); a resource
    // other than api://<client_id> is refused with AADSTS9010010.
    config.features.clientCredentials = { enabled: true };
    config.features.resourceIndicators = {
      enabled: true,
      async defaultResource(ctx, client) {
        return entraScopedApp(ctx) ?? entraResource(client);
      },
      async useGrantedResource() {
        return true;
      },
      async getResourceServerInfo(ctx, resource, client) {
        if (resource !== entraResource(client) && resource !== entraScopedApp(ctx)) {
          throw new errors.InvalidTarget(
            `AADSTS9010010: The resource parameter provided in the request doesn't match with the requested scopes (resource ${resource}, expected ${entraResource(client)}).`,
          );
        }
        return {
          scope: entraAppScopes(ctx, resource).join(' '),
          audience: resource.slice('api://'.length),
          accessTokenTTL,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'RS256' } },
        };
      },
    };
    config.extraTokenClaims = async (ctx, token) => {
      if (!token.accountId) return undefined;
      const { groups, roles, tid, oid } = accountClaims(token.accountId);
      return { groups, roles, tid, oid };
    };
    config.formats = {
      customizers: {
        async jwt(ctx, token, jwt) {
          jwt.header = { typ: 'JWT' };
          // v2 access token claims: scp (the app's scope names without
          // the api://<client_id>/ prefix; .default names none), azp,
          // ver; no scope, no client_id.
          const { payload } = jwt;
          const prefix = `api://${payload.aud}/`;
          const scp = String(payload.scope ?? '').split(' ')
            .filter((s) => s.startsWith(prefix)).map((s) => s.slice(prefix.length))
            .filter((s) => s && s !== '.default');
          if (scp.length > 0) payload.scp = scp.join(' ');
          payload.azp = payload.client_id;
          payload.ver = '2.0';
          delete payload.scope;
          delete payload.client_id;
        },
      },
    };
  }
  return config;
}

const provider = new Provider(issuer, profile === 'default' ? defaultConfig() : profileConfig());
provider.proxy = false;

// ---- Grants for upstreams (see the header comment) ----

const GRANT_JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
const GRANT_TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const TOKEN_TYPE_ID_JAG = 'urn:ietf:params:oauth:token-type:id-jag';
const TOKEN_TYPE_ID_TOKEN = 'urn:ietf:params:oauth:token-type:id_token';
const TOKEN_TYPE_ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';
const ID_JAG_TYP = 'oauth-id-jag+jwt';

// verifyJWT checks an RS256 compact JWT against keys (JWKs) and the
// issuer iss, and that it has not expired; it returns { header, claims }
// or undefined.
function verifyJWT(token, keys, iss) {
  const parts = String(token ?? '').split('.');
  if (parts.length !== 3) return undefined;
  try {
    const header = JSON.parse(Buffer.from(parts[0], 'base64url'));
    const jwk = keys.find((k) => k.kid === header.kid && k.kty === 'RSA');
    if (header.alg !== 'RS256' || !jwk) return undefined;
    const { d, p, q, dp, dq, qi, ...pub } = jwk;
    const ok = crypto.verify('sha256', Buffer.from(`${parts[0]}.${parts[1]}`), crypto.createPublicKey({ key: pub, format: 'jwk' }), Buffer.from(parts[2], 'base64url'));
    const claims = JSON.parse(Buffer.from(parts[1], 'base64url'));
    if (!ok || claims.iss !== iss || !(claims.exp > Date.now() / 1000)) return undefined;
    return { header, claims };
  } catch {
    return undefined;
  }
}

// signJWT signs claims with this IdP's RS256 key, with header typ.
function signJWT(typ, claims) {
  const jwk = jwks.keys.find((k) => k.kty === 'RSA');
  const enc = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const input = `${enc({ alg: 'RS256', typ, kid: jwk.kid })}.${enc(claims)}`;
  const sig = crypto.sign('sha256', Buffer.from(input), crypto.createPrivateKey({ key: jwk, format: 'jwk' }));
  return `${input}.${sig.toString('base64url')}`;
}

// issueJWTAccessToken issues a JWT access token for accountId to client,
// with audience and scope, as the token response's body.
async function issueJWTAccessToken(ctx, accountId, audience, scope) {
  const { client } = ctx.oidc;
  const token = new provider.AccessToken({ accountId, client, gty: ctx.oidc.params.grant_type, scope: scope || undefined });
  token.resourceServer = { audience, scope: scope || '', accessTokenTTL, accessTokenFormat: 'jwt', jwt: { sign: { alg: 'RS256' } } };
  const value = await token.save();
  ctx.body = { access_token: value, token_type: 'Bearer', expires_in: token.expiration, scope: scope || undefined };
}

const audienceOf = (claims) => (Array.isArray(claims.aud) ? claims.aud : [claims.aud]);

if (profile === 'entra') {
  let idjagClients = {};
  if (process.env.IDP_IDJAG_CLIENTS) {
    try {
      idjagClients = JSON.parse(process.env.IDP_IDJAG_CLIENTS);
    } catch (err) {
      die(`IDP_IDJAG_CLIENTS: ${err.message}`);
    }
  }
  // On-behalf-of: Entra's jwt-bearer grant.
  provider.registerGrantType(GRANT_JWT_BEARER, async (ctx) => {
    const { client, params } = ctx.oidc;
    if (params.requested_token_use !== 'on_behalf_of') {
      throw new errors.InvalidRequest("AADSTS900144: The request body must contain the following parameter: 'requested_token_use'.");
    }
    const v = verifyJWT(params.assertion, jwks.keys, issuer);
    if (!v || !v.claims.sub || v.claims.azp === undefined) {
      throw new errors.InvalidGrant('AADSTS50013: Assertion failed signature validation.');
    }
    if (!audienceOf(v.claims).includes(client.clientId)) {
      throw new errors.InvalidGrant('AADSTS50013: Assertion audience does not match the Client app presenting the assertion.');
    }
    const app = entraScopedApp(ctx);
    if (!app) throw new errors.InvalidScope("AADSTS70011: The provided value for the input parameter 'scope' is not valid.");
    process.stderr.write(`idp: on-behalf-of for ${v.claims.sub}\n`);
    await issueJWTAccessToken(ctx, v.claims.sub, app.slice('api://'.length), entraAppScopes(ctx, app).join(' '));
  }, ['assertion', 'requested_token_use', 'scope']);

  // Identity Assertion JWT Authorization Grants, by token exchange.
  provider.registerGrantType(GRANT_TOKEN_EXCHANGE, async (ctx) => {
    const { client, params } = ctx.oidc;
    if (params.requested_token_type !== TOKEN_TYPE_ID_JAG) {
      throw new errors.InvalidRequest(`requested_token_type must be ${TOKEN_TYPE_ID_JAG}`);
    }
    if (!params.audience || !params.resource) throw new errors.InvalidRequest('audience and resource are required');
    const kind = { [TOKEN_TYPE_ID_TOKEN]: 'id_token', [TOKEN_TYPE_ACCESS_TOKEN]: 'access_token' }[params.subject_token_type];
    if (!kind) throw new errors.InvalidRequest('subject_token_type must name an ID token or an access token');
    const v = verifyJWT(params.subject_token, jwks.keys, issuer);
    // An access token of this profile has azp and ver; an ID token does not.
    if (!v || !v.claims.sub || (kind === 'id_token') !== (v.claims.ver === undefined)) {
      throw new errors.InvalidGrant(`the subject token is not a valid ${kind} of this issuer`);
    }
    if (!audienceOf(v.claims).includes(client.clientId)) {
      throw new errors.InvalidGrant('the subject token was not issued to this client');
    }
    const asClient = idjagClients[params.audience];
    if (!asClient) throw new errors.InvalidTarget('no client of yours is known at that audience');
    const now = Math.floor(Date.now() / 1000);
    const jag = signJWT(ID_JAG_TYP, {
      iss: issuer, sub: v.claims.sub, aud: params.audience, client_id: asClient, jti: crypto.randomUUID(),
      iat: now, exp: now + 300, resource: params.resource, ...(params.scope ? { scope: params.scope } : {}),
    });
    process.stderr.write(`idp: id-jag for ${v.claims.sub} from ${kind}\n`);
    ctx.body = { access_token: jag, issued_token_type: TOKEN_TYPE_ID_JAG, token_type: 'N_A', expires_in: 300, ...(params.scope ? { scope: params.scope } : {}) };
  }, ['subject_token', 'subject_token_type', 'requested_token_type', 'audience', 'resource', 'scope']);
}

if (profile === 'default' && process.env.IDP_IDJAG_TRUSTED_ISSUER) {
  const trusted = process.env.IDP_IDJAG_TRUSTED_ISSUER;
  const seen = new Set();
  provider.registerGrantType(GRANT_JWT_BEARER, async (ctx) => {
    const { client, params } = ctx.oidc;
    const res = await fetch(`${trusted}/jwks`);
    const { keys } = await res.json();
    const v = verifyJWT(params.assertion, keys, trusted);
    if (!v || v.header.typ !== ID_JAG_TYP || !v.claims.sub || !v.claims.jti || typeof v.claims.resource !== 'string') {
      throw new errors.InvalidGrant('the assertion is not a valid ID-JAG of the trusted identity provider');
    }
    if (v.claims.aud !== issuer || v.claims.client_id !== client.clientId) {
      throw new errors.InvalidGrant('the ID-JAG is not for this authorization server and client');
    }
    if (seen.has(v.claims.jti)) throw new errors.InvalidGrant('the ID-JAG was already used');
    seen.add(v.claims.jti);
    const allowed = new Set(clientScopes(client));
    const scope = String(v.claims.scope ?? '').split(' ').filter((s) => allowed.has(s)).join(' ');
    await issueJWTAccessToken(ctx, v.claims.sub, v.claims.resource, scope);
  }, ['assertion', 'scope', 'resource']);
}

// The quirks oidc-provider has no switch for, as Koa middleware in front
// of it.
if (profile === 'keycloak') {
  // Keycloak's default client registration policy ("Trusted Hosts")
  // refuses an anonymous registration with 403.
  provider.use(async (ctx, next) => {
    if (ctx.method === 'POST' && ctx.path === '/reg' && !ctx.get('authorization')) {
      ctx.status = 403;
      ctx.set('Cache-Control', 'no-store');
      ctx.body = {
        error: 'insufficient_scope',
        error_description: "Policy 'Trusted Hosts' rejected request to client-registration service. Details: Host not trusted.",
      };
      return;
    }
    await next();
  });
}
// Offline access: oidc-provider keeps the offline_access scope only with
// prompt=consent; these IdPs need no prompt for it, so add the prompt
// (the dev-interactions consent form shows once more). Google refuses the
// offline_access scope (an error page, no redirect) and takes
// access_type=offline instead.
if (profile !== 'default') {
  provider.use(async (ctx, next) => {
    if (ctx.method === 'GET' && ctx.path === '/auth') {
      const query = { ...ctx.query };
      const scopes = String(query.scope ?? '').split(' ').filter(Boolean);
      if (profile === 'google') {
        if (scopes.includes('offline_access')) {
          const valid = scopes.filter((s) => s !== 'offline_access');
          ctx.status = 400;
          ctx.body = {
            error: 'invalid_scope',
            error_description: `Some requested scopes were invalid. {valid=[${valid.join(', ')}], invalid=[offline_access]}`,
          };
          return;
        }
        if (query.access_type === 'offline') scopes.push('offline_access');
      }
      if (scopes.includes('offline_access')) {
        const prompts = new Set(String(query.prompt ?? '').split(' ').filter(Boolean));
        prompts.add('consent');
        query.prompt = [...prompts].join(' ');
      }
      if (query.scope !== undefined) query.scope = scopes.join(' ');
      ctx.query = query;
    }
    await next();
  });
}
if (profile === 'entra') {
  // Every refused resource is AADSTS9010010, also where oidc-provider
  // refuses it itself (a token request naming a resource the code was not
  // granted for).
  provider.use(async (ctx, next) => {
    await next();
    const body = ctx.body;
    if (body && typeof body === 'object' && body.error === 'invalid_target' && !String(body.error_description).includes('AADSTS')) {
      body.error_description = `AADSTS9010010: The resource parameter provided in the request doesn't match with the requested scopes (${body.error_description}).`;
    }
  });
}
if (profile === 'entra' || profile === 'google') {
  // Neither names the issuer in the authorization response (RFC 9207);
  // Entra's discovery also lacks code_challenge_methods_supported, though
  // it accepts S256.
  provider.use(async (ctx, next) => {
    await next();
    if (ctx.path === '/.well-known/openid-configuration' || ctx.path === '/.well-known/oauth-authorization-server') {
      if (ctx.body && typeof ctx.body === 'object') {
        delete ctx.body.authorization_response_iss_parameter_supported;
        if (profile === 'entra') delete ctx.body.code_challenge_methods_supported;
      }
      return;
    }
    const location = ctx.response.get('location');
    if (location && ctx.status >= 300 && ctx.status < 400) {
      const url = URL.parse(location);
      if (url && url.origin !== issuer && url.searchParams.has('iss')) {
        url.searchParams.delete('iss');
        ctx.redirect(url.href);
      }
    }
  });
}

if (process.env.IDP_LOG_TOKENS === '1') {
  provider.use(async (ctx, next) => {
    await next();
    const body = ctx.body;
    if (ctx.method === 'POST' && ctx.path === '/token' && ctx.status === 200 && body && typeof body === 'object') {
      const { access_token, id_token, refresh_token } = body;
      const grant_type = ctx.oidc?.params?.grant_type;
      process.stderr.write(`idp: issued ${JSON.stringify({ grant_type, access_token, id_token, refresh_token })}\n`);
    }
  });
}

// Log server-side errors: a failing test shows them with the IdP's stderr.
provider.on('server_error', (ctx, err) => process.stderr.write(`idp: server_error ${ctx.method} ${ctx.path}: ${err.stack}\n`));
for (const ev of ['grant.error', 'introspection.error', 'registration_create.error', 'revocation.error', 'authorization.error']) {
  provider.on(ev, (ctx, err) => process.stderr.write(`idp: ${ev} ${ctx.method} ${ctx.path}: ${err.message}${err.error_description ? ` (${err.error_description})` : ''}\n`));
}

server.on('request', provider.callback());

process.stdout.write(`${JSON.stringify({ issuer, profile })}\n`);

const shutdown = () => server.close(() => process.exit(0));
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);

if (args.check) {
  const res = await fetch(`${issuer}/.well-known/openid-configuration`);
  const meta = await res.json();
  if (res.status !== 200 || meta.issuer !== issuer) die(`discovery: status ${res.status}, issuer ${meta.issuer}`);
  process.stderr.write(`idp: ok: ${issuer} (oidc-provider, node ${process.version}, ${fileURLToPath(import.meta.url)})\n`);
  process.exit(0);
}
