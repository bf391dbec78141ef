// Package uses counts the uses of a shared resource that its owner closes,
// and tells the owner when the last use is given back: the memory an
// operation holds until the device is done with it (qpactor.Hold), an
// address handle a post holds until ibv_post_send returns.
package uses
