-- What keeps the previous release's calls working while it serves beside
-- this one during a rolling upgrade (docs/deploy.md, "Upgrades"; the rule
-- is in db/README.md). Applied after every other file but privileges.sql.
--
-- A signature that changes is expanded, then contracted: the new one is
-- defined where the function lives, and the old one stays callable for
-- one release. When the change only adds trailing arguments with
-- defaults, the new function already answers the old calls, and no
-- overload may be added beside it (the old calls would become ambiguous).
-- Otherwise the old signature is defined here, delegating to the new
-- one, and a migration of the next release drops it.

-- send_messages gained p_trace_contexts (00035), DEFAULT NULL: the
-- previous release's calls with six arguments resolve to it. A server of
-- that release re-applies its own functions when it restarts, which puts
-- the six-argument send_messages back beside the new one and makes every
-- six-argument call ambiguous ("function convo.send_messages(...) is not
-- unique"); every start of this release drops it again. Drop this
-- statement with the next release.
DROP FUNCTION IF EXISTS convo.send_messages(text[], uuid[], text[], text[], uuid[], text[]);
