/* docs.c: the API's description. GET /openapi.json (also TEI's /api-doc/openapi.json) answers the
 * OpenAPI 3 document scripts/gen_openapi.py writes into openapi.inc; GET /docs a Swagger UI page
 * over it, whose script and style come from a CDN as TEI's page does (the JSON itself needs
 * nothing from outside). */
#include <stdlib.h>
#include <string.h>

#include "server.h"

static const char OPENAPI[] =
#include "openapi.inc"
    ;

static const char SWAGGER[] =
    "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    "<title>bert8 serve: API</title>\n"
    "<link rel=\"stylesheet\" href=\"https://unpkg.com/swagger-ui-dist@5/swagger-ui.css\">\n"
    "</head>\n<body>\n<div id=\"swagger-ui\"></div>\n"
    "<noscript>The API is described at <a href=\"openapi.json\">/openapi.json</a>.</noscript>\n"
    "<script src=\"https://unpkg.com/swagger-ui-dist@5/swagger-ui-bundle.js\" crossorigin></script>\n"
    "<script>window.onload = function () { window.ui = SwaggerUIBundle({url: \"/openapi.json\", "
    "dom_id: \"#swagger-ui\"}); };</script>\n"
    "</body>\n</html>\n";

void srv_docs_route(srv_route_id r, srv_response *resp) {
    *resp = (srv_response){0};
    jbuf b = {0};
    if (r == R_DOCS) {
        jb_puts(&b, SWAGGER);
        resp->content_type = "text/html; charset=utf-8";
    } else {
        /* the version is the library's, filled in here */
        const char *at = strstr(OPENAPI, "@VERSION@");
        jb_put(&b, OPENAPI, at ? (size_t)(at - OPENAPI) : strlen(OPENAPI));
        if (at) {
            jb_puts(&b, bert8_version());
            jb_puts(&b, at + strlen("@VERSION@"));
        }
        resp->content_type = "application/json";
    }
    resp->status = b.oom ? 500 : 200;
    resp->body = jb_take(&b, &resp->len);
}
