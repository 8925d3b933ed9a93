package domain

// IndexUpcasters exposes the check the upcaster table passes when the package is initialised, so
// tests can feed it invalid steps.
var IndexUpcasters = indexUpcasters
