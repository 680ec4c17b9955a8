/*
 * console.h — the operator web console: its page and assets, sign-in and
 * sign-out, and the session-cookie check that lets operator endpoints be
 * called from the page.
 *
 * GET / is the page; GET /console/NAME its scripts, style and icon.
 * POST /v1/console/session {"token": "op_..."} signs in with an operator
 * token: a session cookie (HttpOnly, SameSite=Strict) and, in the body, the
 * CSRF token the page sends back in X-CSRF-Token on every state-changing
 * request. GET /v1/console/session tells the page whether it is signed in
 * (never the CSRF token, which only sign-in hands out); DELETE signs out.
 *
 * Cross-site requests are refused before anything else (403
 * cross_site_request): Sec-Fetch-Site other than same-origin (or none, for
 * a navigation), or an Origin that is not this server's own
 * (http:// or https:// and the request's Host).
 */
#ifndef LP_CONSOLE_H
#define LP_CONSOLE_H

#include "api_internal.h"

#define LP_CONSOLE_COOKIE "ldpref_session"

int lp_console_page(lp_api *api, const lp_request *req, lp_response *resp);
int lp_console_file(lp_api *api, const lp_request *req, lp_response *resp);
int lp_console_sign_in(lp_api *api, const lp_request *req, lp_response *resp);
int lp_console_session_get(lp_api *api, const lp_request *req, lp_response *resp);
int lp_console_sign_out(lp_api *api, const lp_request *req, lp_response *resp);

/* Authorizes an operator request that carries no bearer token: a live
 * session cookie, a same-origin request, and for any method but GET and
 * HEAD the session's CSRF token. LP_OK or the refusal's code
 * (LP_EUNAUTHORIZED, LP_ECROSS_SITE, LP_ECSRF_FAILED). On LP_OK who (may
 * be NULL) is the principal the session signed in with; a session whose
 * token has been revoked since is ended (LP_EUNAUTHORIZED). */
int lp_console_authorize(lp_api *api, const lp_request *req, lp_principal *who);

#endif
