package pmi2

import (
	"fmt"
	"strconv"
	"strings"
)

// Differences from stock, on purpose: a request stock drops without an
// answer (an unknown command, create_kvs, destroy_kvs, getbyidx,
// job-connect, job-disconnect, a line that does not parse) gets an error
// answer, so that the client fails instead of waiting forever; spawn and
// ring, which slurmd-go does not host, are answered with an error too.

// unsupported is the answer to what slurmd-go does not serve.
const unsupported = "not_supported_by_slurmd-go"

// handlePMI1 serves one PMI-1 request (pmi1.c); true ends the connection.
func (s *Server) handlePMI1(tc *taskConn, lrank int, buf string) bool {
	req, err := parseRequest(buf, false)
	if err != nil {
		s.log.Error("mpi/pmi2: invalid client request", "lrank", lrank, "error", err)
		_ = tc.send([]byte("cmd=error rc=-1 msg=invalid_request\n"))
		return false
	}
	if req.bodyErr != nil {
		s.log.Debug("mpi/pmi2: client request pairs", "cmd", req.cmd, "error", req.bodyErr)
	}
	send := func(format string, args ...any) {
		if err := tc.send([]byte(fmt.Sprintf(format, args...))); err != nil {
			s.log.Debug("mpi/pmi2: response to a task failed", "lrank", lrank, "error", err)
		}
	}
	switch req.cmd {
	case "get_maxes":
		send("cmd=maxes rc=0 kvsname_max=%d keylen_max=%d vallen_max=%d\n", maxKVSName, maxKeyLen, maxValLen)
	case "get_universe_size":
		send("cmd=universe_size rc=0 size=%d\n", s.cfg.NTasks)
	case "get_appnum":
		send("cmd=appnum rc=0 appnum=-1\n")
	case "barrier_in":
		s.mu.Lock()
		s.fenceIn()
		s.mu.Unlock()
	case "finalize":
		send("cmd=finalize_ack rc=0\n")
		return true
	case "abort":
		// No answer: the step is cancelled.
		s.tr.KillStep(true)
	case "get_my_kvsname":
		send("cmd=my_kvsname rc=0 kvsname=%d.%d\n", s.cfg.JobID, s.cfg.StepID)
	case "put":
		s.put(req)
		send("cmd=put_result rc=0\n")
	case "get":
		k, _ := req.get("key")
		v, ok := s.kvsGet(k)
		if ok {
			send("cmd=get_result rc=0 value=%s\n", v)
		} else {
			send("cmd=get_result rc=1\n")
		}
	case "publish_name":
		svc, _ := req.get("service")
		port, _ := req.get("port")
		send("cmd=publish_result info=%s\n", okFail(s.namePublish(svc, port) == 0))
	case "unpublish_name":
		svc, _ := req.get("service")
		send("cmd=unpublish_result info=%s\n", okFail(s.nameUnpublish(svc) == 0))
	case "lookup_name":
		svc, _ := req.get("service")
		if port := s.nameLookup(svc); port != "" {
			send("cmd=lookup_result info=ok port=%s\n", port)
		} else {
			send("cmd=lookup_result info=fail\n")
		}
	case "mcmd":
		s.log.Error("mpi/pmi2: PMI1 spawn not supported by slurmd-go", "lrank", lrank)
		send("cmd=spawn_result rc=-1 errmsg=%s\n", unsupported)
	case "create_kvs", "destroy_kvs", "getbyidx":
		s.log.Error(fmt.Sprintf("mpi/pmi2: PMI1 request of '%s' not supported", req.cmd))
		send("cmd=%s rc=-1 msg=%s\n", req.cmd, unsupported)
	default:
		s.log.Error(fmt.Sprintf("mpi/pmi2: invalid pmi1 command received: '%s'", req.cmd))
		send("cmd=error rc=-1 msg=invalid_command\n")
	}
	return false
}

func okFail(ok bool) string {
	if ok {
		return "ok"
	}
	return "fail"
}

func trueFalse(b bool) string {
	if b {
		return "TRUE"
	}
	return "FALSE"
}

// handlePMI2 serves one PMI-2 request (pmi2.c); true ends the connection.
func (s *Server) handlePMI2(tc *taskConn, lrank int, buf string) bool {
	req, err := parseRequest(buf, true)
	if err != nil {
		s.log.Error("mpi/pmi2: invalid client request", "lrank", lrank, "error", err)
		_ = tc.send(pmi2Frame("cmd=error-response;rc=-1;errmsg=invalid request;"))
		return false
	}
	if req.bodyErr != nil {
		s.log.Debug("mpi/pmi2: client request pairs", "cmd", req.cmd, "error", req.bodyErr)
	}
	send := func(format string, args ...any) {
		if err := tc.send(pmi2Frame(fmt.Sprintf(format, args...))); err != nil {
			s.log.Debug("mpi/pmi2: response to a task failed", "lrank", lrank, "error", err)
		}
	}
	switch req.cmd {
	case "fullinit":
		rc := 0
		for _, k := range []string{"pmijobid", "pmirank", "threaded"} {
			if _, ok := req.get(k); !ok {
				s.log.Error(k + " missing in fullinit command")
				rc = 3 // PMI2_ERR_INVALID_ARG
				break
			}
		}
		resp := fmt.Sprintf("cmd=fullinit-response;rc=%d;pmi-version=%d;pmi-subversion=%d;rank=%d;size=%d;appnum=-1;debugged=FALSE;pmiverbose=%s;",
			rc, pmi20Version, pmi20Subversion, s.cfg.GTIDs[lrank], s.cfg.NTasks, trueFalse(s.cfg.Debugged))
		if s.cfg.SpawnerJobID != "" {
			resp += "spawner-jobid=" + s.cfg.SpawnerJobID + ";"
		}
		send("%s", resp)
	case "finalize":
		send("cmd=finalize-response;rc=0;")
		return true
	case "abort":
		if w, _ := req.getBool("isworld"); w {
			s.tr.KillStep(true)
		}
	case "job-getid":
		send("cmd=job-getid-response;rc=0;jobid=%s;", s.cfg.PMIJobID)
	case "kvs-put":
		s.put(req)
		send("cmd=kvs-put-response;rc=0;")
	case "kvs-fence":
		s.mu.Lock()
		s.fenceIn()
		s.mu.Unlock()
	case "kvs-get":
		k, _ := req.get("key")
		v, ok := s.kvsGet(k)
		if ok {
			send("cmd=kvs-get-response;rc=0;found=TRUE;value=%s;", v)
		} else {
			send("cmd=kvs-get-response;rc=0;found=FALSE;")
		}
	case "info-getnodeattr":
		k, _ := req.get("key")
		wait, _ := req.getBool("wait")
		s.mu.Lock()
		v, ok := s.nodeAttr[k]
		if !ok && wait {
			// Answered by the info-putnodeattr that sets it.
			s.pendingAttr = append(s.pendingAttr, pendingAttr{lrank: lrank, key: k})
			s.mu.Unlock()
			return false
		}
		s.mu.Unlock()
		if ok {
			send("cmd=info-getnodeattr-response;rc=0;found=TRUE;value=%s;", v)
		} else {
			send("cmd=info-getnodeattr-response;rc=0;found=FALSE;")
		}
	case "info-putnodeattr":
		k, _ := req.get("key")
		v, _ := req.get("value")
		s.mu.Lock()
		s.nodeAttr[k] = v
		var waiting []*taskConn
		rest := s.pendingAttr[:0]
		for _, p := range s.pendingAttr {
			if p.key == k {
				waiting = append(waiting, s.tasks[p.lrank])
			} else {
				rest = append(rest, p)
			}
		}
		s.pendingAttr = rest
		s.mu.Unlock()
		for _, w := range waiting {
			if w != nil {
				_ = w.send(pmi2Frame(fmt.Sprintf("cmd=info-getnodeattr-response;rc=0;found=TRUE;value=%s;", v)))
			}
		}
		send("cmd=info-putnodeattr-response;rc=0;")
	case "info-getjobattr":
		k, _ := req.get("key")
		if v, ok := s.jobAttr(k); ok {
			send("cmd=info-getjobattr-response;rc=0;found=TRUE;value=%s;", v)
		} else {
			send("cmd=info-getjobattr-response;rc=0;found=FALSE;")
		}
	case "name-publish":
		name, _ := req.get("name")
		port, _ := req.get("port")
		send("cmd=name-publish-response;rc=%d;", s.namePublish(name, port))
	case "name-unpublish":
		name, _ := req.get("name")
		send("cmd=name-unpublish-response;rc=%d;", s.nameUnpublish(name))
	case "name-lookup":
		name, _ := req.get("name")
		if port := s.nameLookup(name); port != "" {
			send("cmd=name-lookup-response;rc=0;value=%s;", port)
		} else {
			send("cmd=name-lookup-response;rc=1;")
		}
	case "spawn", "ring", "job-connect", "job-disconnect":
		s.log.Error(fmt.Sprintf("mpi/pmi2: %s not supported by slurmd-go", req.cmd), "lrank", lrank)
		send("cmd=%s-response;rc=14;errmsg=%s;", req.cmd, unsupported) // PMI2_ERR_OTHER
	default:
		s.log.Error(fmt.Sprintf("mpi/pmi2: invalid pmi2 command received: '%s'", req.cmd))
		send("cmd=%s-response;rc=-1;errmsg=invalid command;", strings.ReplaceAll(req.cmd, ";", "_"))
	}
	return false
}

// jobAttr is info.c job_attr_get.
func (s *Server) jobAttr(key string) (string, bool) {
	switch key {
	case "PMI_process_mapping":
		return s.cfg.ProcMapping, true
	case "universeSize":
		return strconv.Itoa(int(s.cfg.NTasks)), true
	case "mpi_reserved_ports":
		return s.cfg.ResvPorts, s.cfg.ResvPorts != ""
	}
	// Stock compares with >= 0: every key sorting after
	// PMI_netinfo_of_task gets the node's interfaces.
	if key >= "PMI_netinfo_of_task" && s.cfg.NetInfo != nil {
		return s.cfg.NetInfo(), true
	}
	return "", false
}

// put adds a task's pair to the fence being built; temp_kvs_add skips a
// put without key or value.
func (s *Server) put(req *request) {
	k, okK := req.get("key")
	v, okV := req.get("value")
	if !okK || !okV {
		return
	}
	s.mu.Lock()
	s.tempAdd(k, v)
	s.mu.Unlock()
}

// kvsGet is kvs_get: the KVS as the last fence left it (PMI-1 get and
// PMI-2 kvs-get answer from it in their own formats).
func (s *Server) kvsGet(k string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.kvs[k]
	return v, ok
}
