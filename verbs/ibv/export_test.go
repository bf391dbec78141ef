package ibv

// CMInit opens librdmacm's per-device contexts, which live as long as the
// process: TestMain calls it before it counts file descriptors.
var CMInit = cmInit
