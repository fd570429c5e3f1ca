// Package openapitools turns the operations of an OpenAPI 3.0 or 3.1
// document into tools: what each is named, the input schema a client
// sees, the output schema of its result, and where each argument goes in
// the HTTP request. It does not send requests; the package serving HTTP
// tools does, from an [Operation].
//
// Load a document, then select what to serve; nothing is served unless
// selected:
//
//	doc, err := openapitools.Load(data)
//	if err != nil { … }
//	ops, problems := doc.Operations(openapitools.Selection{Tags: []string{"pets"}, Methods: []string{"GET"}})
//
// Schemas are self-contained JSON Schema 2020-12, with no $ref: every
// reference is inlined, allOf merged, oneOf written as anyOf, OpenAPI
// 3.0's nullable and example written as a type list and examples, and a
// recursive schema expanded twice then cut. An input schema is always a
// plain object schema (no combinator at its top), as MCP and the Claude
// API require: a body that is not a plain object is one "body" argument.
// What is left out or changed on the way is a [Problem], for the
// operator.
package openapitools
