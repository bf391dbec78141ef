// Package rcdemo is "verbsrt demo": an RC QP connected to one on another
// device of a provider in this process, an RDMA WRITE, a READ, a SEND with
// immediate data, a FETCH_AND_ADD, a CMP_AND_SWP and a batch of WRITEs
// posted with one doorbell, each checked in memory and printed.
package rcdemo
