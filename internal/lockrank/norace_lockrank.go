//go:build lockrank && !race

package lockrank

func raceDisable() {}
func raceEnable()  {}
