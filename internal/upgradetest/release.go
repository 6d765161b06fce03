// Package upgradetest checks the rolling upgrade from the previous release
// to this one (docs/deploy.md, "Upgrades"): the previous release's server
// keeps serving while this release migrates the database, then both serve
// it side by side. Its test builds the previous release from this
// repository's git history.
package upgradetest

// PreviousRelease is the commit of the release before this one: the test
// upgrades from it. Move it at each release, to the commit the release
// was cut from (the one whose db/schema holds the previous release's
// newest migration), with `git rev-parse <tag or commit>`.
const PreviousRelease = "ae9a954ac8f1860d7e78a155adfe262684d361cb"
