package qpactor

import (
	"github.com/verbsrt/verbsrt/verbs"
)

// opInfo is what an OpError says of one operation.
type opInfo struct {
	opcode     verbs.Opcode
	remoteAddr uint64
	rkey       uint32
	length     uint32
}

func infoOf(op *Op) opInfo {
	return opInfo{opcode: op.Opcode, remoteAddr: op.Remote.RemoteAddr, rkey: op.Remote.RKey, length: op.Local.Length}
}

// opError wraps err, the failure of the operation op of a future covering
// wrs WRs, with Config.WrapError; nil stays nil.
func (a *Actor) opError(op opInfo, wrs int, err error) error {
	if err == nil || a.wrapError == nil {
		return err
	}
	o := Op{Opcode: op.opcode, Local: verbs.SGE{Length: op.length}}
	o.Remote.RemoteAddr, o.Remote.RKey = op.remoteAddr, op.rkey
	return a.wrapError(&o, wrs, err)
}

// submissionError wraps err as the error of the queued submission s (its
// first op, and its size when a batch).
func (a *Actor) submissionError(s *submission, err error) error {
	ops := s.ops()
	return a.opError(infoOf(&ops[0]), len(ops), err)
}
