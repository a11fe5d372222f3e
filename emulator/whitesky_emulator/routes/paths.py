"""The API's path templates, as the spec writes them (under ``/api/1``)."""

C = "/customers/{customer_id}"
CS = C + "/cloudspaces/{cloudspace_id}"
VM = CS + "/vms/{vm_id}"
LOC = C + "/locations/{location}"
