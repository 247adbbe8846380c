function X = dtt2D(x, dtt_type)
% Stand-in for the dtt2D MEX: the 1-D transform along both axes.
  X = dtt1D(dtt1D(x, dtt_type, 1), dtt_type, 2);
end
